// Package metastate is the pure controller metadata state machine of one
// cluster (SPEC §3, §5, §8): the decisions over brokers, topics with configs,
// partitions (R, ISR, ELR, LKE, LKL, L, LE, PE, recovery state,
// reassignment, truncation points), mirrors and cluster configs. The records
// themselves, with the metadata offset, are the image of package metadata,
// which State embeds and which brokers build too; the config table and the
// resolution of effective values are metadata's as well.
//
// # Shape
//
// Like etcd's RawNode, State does no I/O. Every command validates its input
// and computes a *twinlogv1.MetadataDelta holding the full new record of every
// entity it changes, without changing the image; a change whose result equals
// the current state yields a nil delta and nothing is written. The shell
// persists the delta (bbolt, one transaction per offset) and then calls
// Apply, which installs it in the image (metadata.Image.Apply), advances the
// offset, keeps the soft state and returns Events (elections, unclean
// elections, fences) for the shell to log and count. Apply is also the
// replay path at start-up; Snapshot and Restore round-trip the image, and a
// broker builds the same image with metadata.FromSnapshot and Image.Apply to
// answer DescribeTopicPartitions.
//
//	cmd ──► delta ──► shell persists ──► Apply(delta) ──► events
//
// Time enters as nowMs arguments and randomness through the injected Rand;
// there are no goroutines, clocks or logging.
//
// Apply takes ownership of the delta: its records become the image without
// a copy, so a delta must not be modified once applied (it may still be
// read, marshalled, or applied to another State). The image never modifies
// a record in place; commands work on copies. The image keeps two indexes,
// partitions by replica broker and leaderless partitions, which the
// commands' copy-on-write view (txn) reads through the image's iterators, so
// fencing a broker and re-running elections touch only the partitions
// concerned; CheckInvariants verifies them (Image.CheckConsistency).
//
// InitialClusterConfigs writes the first-start cluster configs, including
// the static mirror.state.topic.* and producer.id.space keys that
// AlterConfigs refuses.
//
// AllocateProducerIds hands a live broker the next block of
// ProducerIDBlockSize idempotent producer ids of the cluster's space
// (metadata.ProducerIDSpace): the ProducerIdsRecord of its delta moves the
// next id past the block, and snapshots keep it, so a block once durable is
// never handed out again (CheckTransition checks that the next id only
// rises within the space).
//
// # Mirrors
//
// The shell resolves the source (SPEC §6.1, §6.3) and hands metastate a
// pure SourceTopic per topic; CreateMirror and StartMirrorTopics create a
// missing local topic with the source's name, id, partition count and
// configs, add partitions the source added, and answer
// INCONSISTENT_TOPIC_ID for a local topic with another id. The source's
// cluster id and producer id space come as a SourceCluster: a source in this
// cluster's space, or one that reports none, is refused
// (ProducerIDSpaceRefusal), as new source addresses are. The first
// CreateMirror creates __mirror_state (SPEC §6.4). Stop is only a desired
// state: waitForCatchUp is handled by the shell, which waits for the lag
// reported in heartbeats before writing it.
//
// # Soft state
//
// Heartbeat times and unclean recovery rounds are not persisted (as in
// Kafka): commands may update them when called. After Restore every unfenced
// broker gets a full session from the first Tick, and rounds are planned
// again by Tick. Rounds are planned while a delta is computed (Tick,
// ElectLeaders); if that delta is not persisted the shell must call
// AbortRounds for them.
//
// # Invariants (SPEC §8, controller 1–6)
//
//  1. ISR, ELR, LKE ⊆ R without duplicates, ISR ∩ ELR = ∅; |ISR| ≥ m ⇒ ELR =
//     LKE = ∅; ELR disabled ⇒ ELR = LKE = ∅ (and ISR ≠ ∅ whenever it had a
//     member or an ELR/LKL to refill it from).
//  2. L ≠ −1 ⇒ L ∈ ISR, acceptable when elected; ISR = ∅ ⇒ L = −1;
//     RECOVERING ⇒ |ISR| = 1.
//  3. PE + 1 per written change, no-op changes unwritten; LE never decreases
//     and rises exactly on leader changes, BumpLeaderEpoch and
//     replica-dropping reassignment completions (and cancels).
//  4. ELR, LKE, LKL exactly per §3.3; elections per §3.4–3.5; a round's
//     result only if its re-check holds; no fenced or unacceptable broker
//     (LKL too) is ever elected; L ≠ −1 ⇒ LKL = −1.
//  5. With ELR enabled and no unclean election, min ISR change or
//     reassignment since |ISR| was last ≥ m: |ISR ∪ ELR ∪ LKE| ≥ m, and
//     |ISR ∪ ELR| ≥ m without unclean registrations (checked by the property
//     test's model).
//  6. Nobody joins an ISR unacceptable or with a stale broker epoch; after an
//     unclean registration a broker is in no ISR/ELR (with ELR enabled) until
//     a leader re-adds it or an unclean election picks it.
//
// CheckInvariants checks 1, 2 and the state part of 4 on the image;
// CheckTransition checks 3, 4 and 6 on a delta against the image it was
// computed on. Tests call both after every step.
//
// # Deviation from SPEC: min.insync.replicas in AlterPartition
//
// AlterPartitionRequest carries min_insync_replicas, the m the leader
// applies (0 = unknown, unchecked). After SPEC §3.6 checks 1–5, a request
// whose m differs from the controller's current m (min(min.insync.replicas,
// |R|)) fails INVALID_UPDATE_VERSION and nothing is written. Reason (the
// simulator's seed 169, a flaw in §3.3 + §3.8): m goes 2 → 3; the leader,
// not yet having applied it (§3.8 allows that), shrinks ISR {2,3,4} to
// {2,4}; computed with the new m, §3.3 moves 3 into ELR; the leader, still
// at m 2, moves the HW past 3's LEO, breaking §8.7, and a later clean ELR
// election of 3 loses acknowledged records (§8.12). With the check, ISR and
// ELR are only ever computed with the m the leader's HW rule uses. A config
// change still writes nothing for a partition that stays below the new m
// (S14). The refusal, like every refusal after check 5, carries the current
// {L, LE, ISR, PE}: the request named that partition epoch, so it was never
// applied, and the leader rolls back and proposes again under the m it
// applies by then (an ambiguous answer would wait for metadata with a newer
// partition epoch, which nothing writes when m goes back before the leader
// saw it change: simulator seed 1416705).
//
// # Concurrency
//
// State is not safe for concurrent use: the controller shell owns it from a
// single goroutine. Records returned by accessors must not be modified.
// Each delta must be applied (or dropped) before the next command runs.
package metastate
