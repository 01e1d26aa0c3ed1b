#include "dfuse/policy/contract.h"

#include <array>
#include <string>
#include <vector>

#include "dfuse/core/error.h"
#include "common/text_table.h"

namespace dfuse {
namespace {

constexpr std::array kContracts = {Contract::bit_exact, Contract::bit_exact_verified, Contract::close,
                                   Contract::selection_equivalent, Contract::producer};

}  // namespace

std::string_view contract_name(Contract c) {
  switch (c) {
    case Contract::bit_exact: return "bit-exact";
    case Contract::bit_exact_verified: return "bit-exact-verified";
    case Contract::close: return "close";
    case Contract::selection_equivalent: return "selection-equivalent";
    case Contract::producer: return "producer";
  }
  return "invalid";
}

Contract parse_contract(std::string_view s) {
  std::vector<std::string_view> valid;
  for (Contract c : kContracts) {
    if (contract_name(c) == s) return c;
    valid.push_back(contract_name(c));
  }
  throw InvalidArgument("unknown contract \"" + std::string(s) + "\"; valid: " + detail::join_names(valid));
}

bool is_bit_exact(Contract c) { return c == Contract::bit_exact || c == Contract::bit_exact_verified; }

}  // namespace dfuse
