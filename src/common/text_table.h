// dfuse policy: fixed-width text tables for the Gate and MountPlan reports.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dfuse::detail {

// Pads every column but the last to its widest cell, so free-form text (reasons, signatures)
// can go in the last column without widening the rest. Rows shorter than the header are
// padded with empty cells.
std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows);

// "a, b, c": the valid-choices part of an error message.
std::string join_names(const std::vector<std::string_view>& names);

}  // namespace dfuse::detail
