//===- PipelineScheduleTest.cpp - schedules, validation, simulation -------===//
#include "mp/Support/PipelineSchedule.h"

#include <gtest/gtest.h>

using namespace mp::pipeline;

namespace {

/// Forwards a rank runs before its first backward.
int64_t warmupOf(const std::vector<Action> &list) {
  int64_t n = 0;
  for (const Action &a : list) {
    if (a.kind == ActionKind::Backward)
      break;
    n += a.kind == ActionKind::Forward;
  }
  return n;
}

/// The compute actions of a rank as tokens ("F0.3", "B1.0").
std::string computeOrder(const std::vector<Action> &list) {
  std::string out;
  for (const Action &a : list)
    if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward)
      out += (out.empty() ? "" : " ") +
             std::string(a.kind == ActionKind::Forward ? "F" : "B") +
             std::to_string(a.chunk) + "." + std::to_string(a.microbatch);
  return out;
}

TEST(PipelineSchedule, OneFOneBWarmsUpWithTheStagesAfterIt) {
  Dims d{4, 1, 8};
  ASSERT_EQ(checkDims(ScheduleKind::OneFOneB, d), "");
  Schedule s = generate(ScheduleKind::OneFOneB, d);
  ASSERT_EQ(s.size(), 4u);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_EQ(warmupOf(s[r]), std::min<int64_t>(4 - r - 1, 8) + 1) << r;
  EXPECT_EQ(computeOrder(s[3]), "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3 "
                                "F0.4 B0.4 F0.5 B0.5 F0.6 B0.6 F0.7 B0.7");
  EXPECT_EQ(validate(s, d), "");
}

TEST(PipelineSchedule, TransfersSurroundEachComputeStep) {
  Dims d{2, 1, 2};
  Schedule s = generate(ScheduleKind::OneFOneB, d);
  EXPECT_EQ(describe(s), "rank 0: F0.0 sa0.0>1 F0.1 sa0.1>1 rg0.0<1 B0.0 "
                         "rg0.1<1 B0.1\n"
                         "rank 1: ra0.0<0 F0.0 B0.0 sg0.0>0 ra0.1<0 F0.1 "
                         "B0.1 sg0.1>0\n");
}

TEST(PipelineSchedule, GPipeRunsEveryForwardFirst) {
  Dims d{3, 1, 4};
  Schedule s = generate(ScheduleKind::GPipe, d);
  for (const auto &list : s)
    EXPECT_EQ(warmupOf(list), 4);
  EXPECT_EQ(validate(s, d), "");
}

TEST(PipelineSchedule, InterleavedWarmupIsMegatrons) {
  Dims d{4, 2, 8};
  ASSERT_EQ(checkDims(ScheduleKind::Interleaved, d), "");
  Schedule s = generate(ScheduleKind::Interleaved, d);
  for (int64_t r = 0; r < 4; ++r)
    // 2(p-r-1) + (v-1)p forwards before the first backward, plus the one
    // the first steady step runs.
    EXPECT_EQ(warmupOf(s[r]), 2 * (4 - r - 1) + (2 - 1) * 4 + 1) << r;
  // Chunk order: p microbatches of chunk 0, the same of chunk 1, then on.
  EXPECT_EQ(computeOrder(s[0]).substr(0, 47),
            "F0.0 F0.1 F0.2 F0.3 F1.0 F1.1 F1.2 F1.3 F0.4 F0");
  EXPECT_EQ(validate(s, d), "");
  // With as many microbatches as stages every forward comes first.
  Dims square{4, 2, 4};
  Schedule all = generate(ScheduleKind::Interleaved, square);
  for (const auto &list : all)
    EXPECT_EQ(warmupOf(list), 8);
  EXPECT_EQ(validate(all, square), "");
}

TEST(PipelineSchedule, InterleavedChunksAreMegatronsVirtualStages) {
  Dims d{2, 2, 2};
  EXPECT_EQ(d.virtualStage(0, 0), 0);
  EXPECT_EQ(d.virtualStage(1, 0), 1);
  EXPECT_EQ(d.virtualStage(0, 1), 2);
  EXPECT_EQ(d.virtualStage(1, 1), 3);
  // Rank 1's chunk 0 sends to rank 0's chunk 1, across the wrap.
  Schedule s = generate(ScheduleKind::Interleaved, d);
  bool wraps = false;
  for (const Action &a : s[1])
    wraps |=
        a.kind == ActionKind::SendActivation && a.chunk == 0 && a.peer == 0;
  EXPECT_TRUE(wraps);
}

TEST(PipelineSchedule, BubbleIsTheClosedForm) {
  std::string error;
  for (auto [p, m] : {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {4, 16}}) {
    for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
      Dims d{p, 1, m};
      auto t = simulate(generate(kind, d), d, Costs::uniform(d), error);
      ASSERT_TRUE(t) << error;
      EXPECT_NEAR(t->bubble, double(p - 1) / m, 1e-12)
          << scheduleName(kind) << " p=" << p << " m=" << m;
    }
    for (int64_t v : {2, 3}) {
      Dims d{p, v, m};
      auto t = simulate(generate(ScheduleKind::Interleaved, d), d,
                        Costs::uniform(d), error);
      ASSERT_TRUE(t) << error;
      EXPECT_NEAR(t->bubble, double(p - 1) / (v * m), 1e-12)
          << "interleaved p=" << p << " v=" << v << " m=" << m;
    }
  }
}

TEST(PipelineSchedule, BubbleCountsEveryRanksIdleTime) {
  // Two stages, the second three times the first: rank 0 idles while rank 1
  // works, which the busiest rank alone would not show.
  Dims d{2, 1, 2};
  Costs c;
  c.forward = {1, 3};
  c.backward = {2, 6};
  std::string error;
  auto t = simulate(generate(ScheduleKind::OneFOneB, d), d, c, error);
  ASSERT_TRUE(t) << error;
  // Makespan: F0 F0' (1+1), then rank 1's F F B B ... = 1 + 2*(3+6) + 2 = 21
  // with rank 0's last backward after rank 1's; compute 2*3 + 2*9 = 24.
  EXPECT_NEAR(t->makespan, 21, 1e-12);
  EXPECT_NEAR(t->bubble, (2 * 21.0 - 24) / 24, 1e-12);
}

TEST(PipelineSchedule, OneFOneBRunsFewerMicrobatchesThanStages) {
  // As Megatron's: each rank's warm-up is capped at the microbatches, so
  // the first ranks run every forward first and the last alternates.
  Dims d{4, 1, 3};
  ASSERT_EQ(checkDims(ScheduleKind::OneFOneB, d), "");
  Schedule s = generate(ScheduleKind::OneFOneB, d);
  EXPECT_EQ(computeOrder(s[0]), "F0.0 F0.1 F0.2 B0.0 B0.1 B0.2");
  EXPECT_EQ(computeOrder(s[2]), "F0.0 F0.1 B0.0 F0.2 B0.1 B0.2");
  EXPECT_EQ(computeOrder(s[3]), "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2");
  EXPECT_EQ(validate(s, d), "");
  Dims one{2, 1, 1};
  EXPECT_EQ(checkDims(ScheduleKind::OneFOneB, one), "");
  EXPECT_EQ(validate(generate(ScheduleKind::OneFOneB, one), one), "");
}

TEST(PipelineSchedule, DimsThatCannotRunAreErrors) {
  EXPECT_NE(
      checkDims(ScheduleKind::Interleaved, {4, 2, 6}).find("multiple of pp"),
      std::string::npos);
  EXPECT_NE(checkDims(ScheduleKind::Interleaved, {4, 1, 8}).find("vp >= 2"),
            std::string::npos);
  EXPECT_NE(checkDims(ScheduleKind::GPipe, {2, 2, 4}).find("interleaved"),
            std::string::npos);
  EXPECT_NE(checkDims(ScheduleKind::GPipe, {0, 1, 4}), "");
  EXPECT_NE(checkDims(ScheduleKind::Interleaved, {2, int64_t(1) << 62, 4})
                .find("too large"),
            std::string::npos);
  EXPECT_NE(checkDims(ScheduleKind::GPipe, {2, 1, int64_t(1) << 32})
                .find("too large"),
            std::string::npos);
  EXPECT_EQ(parseSchedule("1f1b"), ScheduleKind::OneFOneB);
  EXPECT_FALSE(parseSchedule("zero-bubble"));
}

TEST(PipelineSchedule, ValidationRejectsBadSchedules) {
  Dims d{2, 1, 2};
  const Schedule good = generate(ScheduleKind::OneFOneB, d);
  ASSERT_EQ(validate(good, d), "");

  // Rank 1 runs microbatch 1 first: with tags this could run, but a
  // transport without them delivers microbatch 0's activation first.
  Schedule swapped = good;
  std::swap(swapped[0][4], swapped[0][6]); // rg0.0 <-> rg0.1
  std::swap(swapped[0][5], swapped[0][7]); // B0.0 <-> B0.1
  std::swap(swapped[1][0], swapped[1][4]); // ra0.0 <-> ra0.1
  std::swap(swapped[1][1], swapped[1][5]); // F0.0 <-> F0.1
  std::swap(swapped[1][2], swapped[1][6]); // B0.0 <-> B0.1
  std::swap(swapped[1][3], swapped[1][7]); // sg0.0 <-> sg0.1
  // Rank 0 waits for the gradient before it sends the activation that
  // gradient needs; rank 1 waits for that activation. Every transfer is in
  // place and in order, and yet nothing can move.
  Dims one{2, 1, 1};
  Schedule deadlock = {{{ActionKind::Forward, 0, 0},
                        {ActionKind::RecvGradient, 0, 0, 1},
                        {ActionKind::SendActivation, 0, 0, 1},
                        {ActionKind::Backward, 0, 0}},
                       {{ActionKind::RecvActivation, 0, 0, 0},
                        {ActionKind::Forward, 0, 0},
                        {ActionKind::Backward, 0, 0},
                        {ActionKind::SendGradient, 0, 0, 0}}};
  std::string why = validate(deadlock, one);
  EXPECT_NE(why.find("the schedule deadlocks"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 0's receive gradient of chunk 0, microbatch 0 "
                     "from rank 1 never arrives"),
            std::string::npos)
      << why;
  why = validate(swapped, d);
  EXPECT_NE(why.find("rank 1 receives from rank 0 in another order than it "
                     "sends"),
            std::string::npos)
      << why;

  Schedule backwardFirst = good;
  std::swap(backwardFirst[1][1], backwardFirst[1][2]);
  EXPECT_NE(validate(backwardFirst, d).find("comes before its forward"),
            std::string::npos);

  Schedule noSend = good;
  noSend[0].erase(noSend[0].begin() + 1); // sa0.0>1
  EXPECT_NE(validate(noSend, d).find("rank 0's send activation of chunk 0, "
                                     "microbatch 0 to rank 1 is missing"),
            std::string::npos)
      << validate(noSend, d);

  Schedule wrongPeer = good;
  wrongPeer[1][0].peer = 1;
  EXPECT_NE(validate(wrongPeer, d).find("names the wrong rank"),
            std::string::npos);

  Schedule extra = good;
  extra[0].insert(extra[0].begin(), {ActionKind::RecvActivation, 0, 0, 1});
  EXPECT_NE(validate(extra, d).find("has no peer stage"), std::string::npos)
      << validate(extra, d);

  Schedule missing = good;
  missing[1].pop_back();
  missing[1].pop_back(); // B0.1 and its send
  EXPECT_NE(validate(missing, d)
                .find("backward of chunk 0, microbatch 1 is "
                      "missing"),
            std::string::npos);
}

} // namespace
