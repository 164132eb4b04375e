// The executors' hand-written protocols as plans (collectives/exec/protocol_plans.hpp), checked by
// the verifier for the values the executors use, and broken on purpose to show the verifier
// catches a broken rule: one credit too many lets the sender overwrite a slot the receiver has not
// drained; one parity lets a writer overwrite a round its reader has not read.
#include <gtest/gtest.h>

#include <string>

#include "collectives/exec/engine_impl.hpp"
#include "collectives/exec/protocol_plans.hpp"
#include "collectives/exec/protocols.hpp"
#include "collectives/plan/verifier.hpp"

namespace tessera {
namespace {

VerifyReport verify(const Plan& p) {
  VerifyReport report;
  (void)verifyPlan(p, &report);
  return report;
}

TEST(ProtocolRules, RingAndParitiesAsTheExecutorsCountThem) {
  EXPECT_EQ(proto::ringSlot(0, kP2PSlots), 0u);
  EXPECT_EQ(proto::ringSlot(kP2PSlots + 3, kP2PSlots), 3u);
  EXPECT_TRUE(proto::ringHasCredit(7, 0, 8));
  EXPECT_FALSE(proto::ringHasCredit(8, 0, 8));
  EXPECT_TRUE(proto::ringHasCredit(9, 2, 8));
  EXPECT_EQ(proto::exchangeParity(5), 1u);
  EXPECT_EQ(proto::exchangeParity(6), 0u);
}

// The host executor's ring (kP2PSlots) and the ring sizes the device executor's links may have,
// around the ring once and three times per iteration (the verifier runs two iterations).
TEST(SendRecvRing, VerifiesWithTheExecutorsCredits) {
  for (int slots : {1, 2, 3, 4, 8, kP2PSlots}) {
    for (int laps : {1, 3}) {
      Plan p;
      ASSERT_EQ(sendRecvRingPlan(slots, laps * slots, slots, &p), tsrSuccess);
      VerifyReport r = verify(p);
      EXPECT_TRUE(r.ok()) << slots << " slots, " << laps << " laps: " << r.message;
    }
  }
}

TEST(SendRecvRing, OneCreditTooManyIsARace) {
  for (int slots : {1, 4, kP2PSlots}) {
    Plan p;
    ASSERT_EQ(sendRecvRingPlan(slots, 2 * slots, slots + 1, &p), tsrSuccess);
    VerifyReport r = verify(p);
    EXPECT_EQ(r.property, VerifyProperty::kRace) << r.message;
    EXPECT_NE(r.message.find("scratch"), std::string::npos) << r.message;
  }
}

TEST(SendRecvRing, NoCreditDeadlocks) {
  Plan p;
  ASSERT_EQ(sendRecvRingPlan(4, 4, 0, &p), tsrSuccess);
  VerifyReport r = verify(p);
  EXPECT_EQ(r.property, VerifyProperty::kDeadlock) << r.message;
}

TEST(SendRecvRing, RefusesPiecesThatAreNotWholeLaps) {
  Plan p;
  EXPECT_EQ(sendRecvRingPlan(4, 6, 4, &p), tsrInvalidArgument);
  EXPECT_EQ(sendRecvRingPlan(0, 4, 0, &p), tsrInvalidArgument);
}

// The host and device LL protocols and the zero-copy handshake: every rank exchanges with every
// other in every round, in kExchangeParities parities.
TEST(ExchangeRounds, VerifiesWithTheExecutorsParities) {
  for (int n : {2, 3, 4, 5, 8}) {
    for (int rounds : {proto::kExchangeParities, 3 * proto::kExchangeParities}) {
      Plan p;
      ASSERT_EQ(exchangeRoundsPlan(n, rounds, proto::kExchangeParities, &p), tsrSuccess);
      VerifyReport r = verify(p);
      EXPECT_TRUE(r.ok()) << n << " ranks, " << rounds << " rounds: " << r.message;
    }
  }
}

TEST(ExchangeRounds, OneParityIsARace) {
  for (int n : {2, 3, 5}) {
    Plan p;
    ASSERT_EQ(exchangeRoundsPlan(n, 2, 1, &p), tsrSuccess);
    VerifyReport r = verify(p);
    EXPECT_EQ(r.property, VerifyProperty::kRace) << n << " ranks: " << r.message;
  }
}

}  // namespace
}  // namespace tessera
