// Quality tiers and numerical contracts: names, strict parsing, cumulative ordering.
#include <gtest/gtest.h>

#include <string>

#include "dfuse/core/error.h"
#include "dfuse/policy/contract.h"
#include "dfuse/policy/quality.h"

namespace dfuse {
namespace {

// The error message must name the bad input and every valid choice.
template <typename Parse>
void expect_rejected(Parse parse, const std::string& input, std::initializer_list<const char*> valid) {
  try {
    parse(input);
    FAIL() << "\"" << input << "\" was accepted";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("\"" + input + "\""), std::string::npos) << message;
    for (const char* name : valid) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

TEST(PolicyQuality, ParsesEveryTierAndRoundTripsItsName) {
  EXPECT_EQ(parse_quality("lossless"), Quality::lossless);
  EXPECT_EQ(parse_quality("extra-high"), Quality::extra_high);
  EXPECT_EQ(parse_quality("high"), Quality::high);
  for (Quality q : {Quality::lossless, Quality::extra_high, Quality::high}) {
    EXPECT_EQ(parse_quality(quality_name(q)), q);
  }
}

TEST(PolicyQuality, RejectsUnknownNamesListingTheValidOnes) {
  const auto parse = [](const std::string& s) { return parse_quality(s); };
  for (const char* bad : {"ultra", "", "Lossless", "extra_high", "high ", "exact"}) {
    expect_rejected(parse, bad, {"lossless", "extra-high", "high"});
  }
  try {
    parse_quality("ultra");
    FAIL() << "\"ultra\" was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "unknown quality \"ultra\"; valid: lossless, extra-high, high");
  }
}

TEST(PolicyQuality, TiersAreCumulative) {
  EXPECT_TRUE(quality_allows(Quality::lossless, Quality::lossless));
  EXPECT_FALSE(quality_allows(Quality::lossless, Quality::extra_high));
  EXPECT_FALSE(quality_allows(Quality::lossless, Quality::high));
  EXPECT_TRUE(quality_allows(Quality::extra_high, Quality::lossless));
  EXPECT_TRUE(quality_allows(Quality::extra_high, Quality::extra_high));
  EXPECT_FALSE(quality_allows(Quality::extra_high, Quality::high));
  EXPECT_TRUE(quality_allows(Quality::high, Quality::lossless));
  EXPECT_TRUE(quality_allows(Quality::high, Quality::extra_high));
  EXPECT_TRUE(quality_allows(Quality::high, Quality::high));
}

TEST(PolicyContract, ParsesEveryContractAndRoundTripsItsName) {
  const Contract all[] = {Contract::bit_exact, Contract::bit_exact_verified, Contract::close,
                          Contract::selection_equivalent, Contract::producer};
  for (Contract c : all) EXPECT_EQ(parse_contract(contract_name(c)), c);
  EXPECT_EQ(contract_name(Contract::bit_exact), "bit-exact");
  EXPECT_EQ(contract_name(Contract::bit_exact_verified), "bit-exact-verified");
  EXPECT_EQ(contract_name(Contract::selection_equivalent), "selection-equivalent");
}

TEST(PolicyContract, RejectsUnknownNamesListingTheValidOnes) {
  const auto parse = [](const std::string& s) { return parse_contract(s); };
  for (const char* bad : {"exact", "bit_exact", ""}) {
    expect_rejected(parse, bad,
                    {"bit-exact", "bit-exact-verified", "close", "selection-equivalent", "producer"});
  }
}

TEST(PolicyContract, OnlyBitExactContractsAreBitExact) {
  EXPECT_TRUE(is_bit_exact(Contract::bit_exact));
  EXPECT_TRUE(is_bit_exact(Contract::bit_exact_verified));
  EXPECT_FALSE(is_bit_exact(Contract::close));
  EXPECT_FALSE(is_bit_exact(Contract::selection_equivalent));
  EXPECT_FALSE(is_bit_exact(Contract::producer));
}

}  // namespace
}  // namespace dfuse
