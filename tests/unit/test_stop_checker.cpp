#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mo/engine/sampler.h"
#include "mo/engine/stop_checker.h"

namespace {

using mo::engine::SamplingParams;
using mo::engine::StopChecker;

// Pushes each piece; returns everything emitted (plus the flush when nothing matched) and the match.
struct Streamed {
  std::string text;
  std::string matched;
};
Streamed stream(StopChecker& c, const std::vector<std::string>& pieces) {
  Streamed out;
  for (const std::string& p : pieces) {
    const auto r = c.push(p);
    out.text += r.emit;
    if (r.stopped) {
      out.matched = r.matched;
      return out;
    }
  }
  out.text += c.flush();
  return out;
}

void expect_push(StopChecker& c, const std::string& in, const std::string& emit, bool stopped = false, const std::string& matched = "") {
  const auto r = c.push(in);
  EXPECT_EQ(r.emit, emit) << "push '" << in << "'";
  EXPECT_EQ(r.stopped, stopped) << "push '" << in << "'";
  EXPECT_EQ(r.matched, matched) << "push '" << in << "'";
}

TEST(StopChecker, StopStringSplitAcrossThreePushes) {
  StopChecker c({"<|end|>"});
  expect_push(c, "Hello <|", "Hello ");
  expect_push(c, "en", "");
  expect_push(c, "d|> trailing", "", true, "<|end|>");
}

TEST(StopChecker, StopStringInsideOneToken) {
  StopChecker c({"STOP"});
  expect_push(c, "abcSTOPdef", "abc", true, "STOP");
}

TEST(StopChecker, PartialMatchThatIsNotOneIsReleased) {
  StopChecker c({"abc"});
  expect_push(c, "xab", "x");
  expect_push(c, "d", "abd");
  expect_push(c, "a", "");
  expect_push(c, "bx", "abx");
  // The held "ab" is released when a real match starts right after it.
  StopChecker again({"abc"});
  expect_push(again, "ab", "");
  expect_push(again, "abc", "ab", true, "abc");
  // A prefix that restarts inside itself: "aa" + "aab" holds "aab" at offset 2.
  StopChecker restart({"aab"});
  expect_push(restart, "aa", "");
  expect_push(restart, "aab", "aa", true, "aab");
}

TEST(StopChecker, OverlappingCandidatesTheOneThatEndsFirstWins) {
  // "ab" completes before "abc" could, whatever the list order.
  StopChecker split({"abc", "ab"});
  expect_push(split, "xa", "x");
  expect_push(split, "bc", "", true, "ab");
  StopChecker whole({"abc", "ab"});
  expect_push(whole, "xabc", "x", true, "ab");
  // Both end at the same byte: the first in the list wins.
  StopChecker long_first({"abc", "bc"});
  expect_push(long_first, "xabc", "x", true, "abc");
  StopChecker short_first({"bc", "abc"});
  expect_push(short_first, "xabc", "xa", true, "bc");
}

TEST(StopChecker, MultipleStops) {
  StopChecker c({"\n\n", "###"});
  expect_push(c, "one#", "one");
  expect_push(c, "#two", "##two");
  expect_push(c, "\n", "");
  expect_push(c, "\nrest", "", true, "\n\n");
}

TEST(StopChecker, FlushReleasesHeldTextAtTheEnd) {
  StopChecker c({"END"});
  expect_push(c, "the E", "the ");
  expect_push(c, "N", "");
  EXPECT_EQ(c.flush(), "EN");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, NothingAfterAStop) {
  StopChecker c({"END"});
  expect_push(c, "xEND", "x", true, "END");
  expect_push(c, "more", "", true, "END");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, IncludeStopStringHoldsNothingBack) {
  StopChecker c({"END"}, true);
  expect_push(c, "the E", "the E");
  expect_push(c, "ND, more", "ND", true, "END");
  StopChecker one({"END"}, true);
  expect_push(one, "aENDb", "aEND", true, "END");
}

TEST(StopChecker, Utf8CharactersStayWhole) {
  StopChecker c({"\xC3\xA9!"});  // "é!"
  expect_push(c, "caf\xC3\xA9", "caf");
  expect_push(c, "?", "\xC3\xA9?");
  expect_push(c, "\xC3\xA9", "");
  expect_push(c, "!", "", true, "\xC3\xA9!");
}

TEST(StopChecker, NoStopsPassesEverythingThrough) {
  StopChecker c({});
  expect_push(c, "any", "any");
  expect_push(c, "thing", "thing");
  EXPECT_EQ(c.flush(), "");
}

TEST(StopChecker, EverySplitGivesTheSameTextAsOnePush) {
  const std::string text = "ab<en<e<end>>nd>";
  for (const std::vector<std::string>& stops :
       {std::vector<std::string>{"<end>"}, {"nd>", "<end>"}, {"zzz"}, {"<e<", "b<"}, {"<en<e<end>>nd>x"}}) {
    for (bool include : {false, true}) {
      StopChecker whole(stops, include);
      const Streamed want = stream(whole, {text});
      for (std::size_t i = 0; i <= text.size(); ++i)
        for (std::size_t j = i; j <= text.size(); ++j) {
          StopChecker c(stops, include);
          const Streamed got = stream(c, {text.substr(0, i), text.substr(i, j - i), text.substr(j)});
          ASSERT_EQ(got.text, want.text) << "split " << i << "," << j << " stops[0] " << stops[0] << " include " << include;
          ASSERT_EQ(got.matched, want.matched) << "split " << i << "," << j << " stops[0] " << stops[0];
        }
    }
  }
  StopChecker check({"nd>", "<end>"});
  EXPECT_EQ(stream(check, {text}).text, "ab<en<e<e");  // both end at byte 12: list order
  StopChecker check_include({"nd>", "<end>"}, true);
  EXPECT_EQ(stream(check_include, {text}).text, "ab<en<e<end>");
}

TEST(StopToken, EosStopsUnlessIgnoredStopTokenIdsAlwaysStop) {
  const std::vector<std::int32_t> eos = {2, 7};
  SamplingParams p;
  p.stop_token_ids = {3};
  EXPECT_TRUE(mo::engine::is_stop_token(2, p, eos));
  EXPECT_TRUE(mo::engine::is_stop_token(7, p, eos));
  EXPECT_TRUE(mo::engine::is_stop_token(3, p, eos));
  EXPECT_FALSE(mo::engine::is_stop_token(4, p, eos));
  p.ignore_eos = true;
  EXPECT_FALSE(mo::engine::is_stop_token(2, p, eos));
  EXPECT_TRUE(mo::engine::is_stop_token(3, p, eos));
}

}  // namespace
