#include "common/text_table.h"

#include <algorithm>

namespace dfuse::detail {

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size());
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  };
  widen(header);
  for (const auto& row : rows) widen(row);

  std::string text;
  auto append_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < widths.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : std::string();
      line += cell;
      if (c + 1 < widths.size()) line.append(widths[c] - cell.size() + 2, ' ');
    }
    // Trailing blanks come from an empty last cell; they only make diffs noisy.
    line.erase(line.find_last_not_of(' ') + 1);
    text += line;
    text += '\n';
  };
  append_row(header);
  std::vector<std::string> rule;
  for (size_t w : widths) rule.emplace_back(w, '-');
  append_row(rule);
  for (const auto& row : rows) append_row(row);
  return text;
}

std::string join_names(const std::vector<std::string_view>& names) {
  std::string text;
  for (std::string_view name : names) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

}  // namespace dfuse::detail
