// Package storage is the partition log engine (SPEC §2): segments of record
// batches with sparse offset and time indexes, the leader epoch cache
// (storage/epoch), per-dir checkpoints and crash recovery, all through the
// FS seam (storage/vfs) so tests can run on a crashable MemFS.
//
// # Files
//
//	<logdir>/
//	  replication-offset-checkpoint      HW per partition
//	  log-start-offset-checkpoint
//	  recovery-point-offset-checkpoint
//	  .twinlog-clean-shutdown            {"version":0,"brokerEpoch":N}
//	  <topic>-<partition>/
//	    00000000000000000000.log         batches
//	    00000000000000000000.index       relOffset → position
//	    00000000000000000000.timeindex   maxTimestamp → relOffset
//	    00000000000000000000.snapshot    idempotent producers as of the offset
//	    00000000000000000000.log.cleaned a cleaned segment being written
//	    00000000000000000000.log.swap    a cleaned segment being swapped in
//	    leader-epoch-checkpoint
//	    partition.metadata
//	    cleaner-offset-checkpoint        compaction rounds (end offset, time)
//
// Offset checkpoints (Kafka's text format, sorted by topic, partition):
//
//	0                      version
//	2                      count
//	orders 0 1200          topic partition offset
//	orders 1 998
//
// leader-epoch-checkpoint is "0", count, then "epoch startOffset" lines
// (SPEC §2.3). partition.metadata is "version: 0", "topic_id: <id>",
// "aligned_epoch: <LE or -1>". cleaner-offset-checkpoint is "0", count,
// then "endOffset timeMs" lines (see Compaction). All of them, and the
// clean-shutdown file, are written tmp → fsync → rename → fsync dir.
//
// # Batch (SPEC §2.2): Kafka's RecordBatch v2, big-endian
//
//	 0               8          12            16      17       21
//	+---------------+-----------+-------------+-------+--------+
//	| baseOffset i64| length i32| leaderEpoch | magic | crc u32|
//	+---------------+-----------+-------------+-------+--------+
//	 21          23               27               35             43
//	+------------+-----------------+----------------+--------------+
//	| attrs i16  | lastOffsetDelta | firstTimestamp | maxTimestamp |
//	+------------+-----------------+----------------+--------------+
//	 43               51              53               57            61
//	+----------------+---------------+----------------+-------------+
//	| producerId i64 | producerEpoch | baseSequence   | recordCount |
//	+----------------+---------------+----------------+-------------+
//	| records ...                                                   |
//	+---------------------------------------------------------------+
//
// magic is 2; length counts the bytes after it; crc is CRC-32C of bytes
// 21..end, so baseOffset and leaderEpoch can be stamped in place. A batch
// without an idempotent producer has producerId, producerEpoch and
// baseSequence −1. attrs bits 0–2 are the compression codec (Kafka's: 1
// gzip, 2 snappy raw or xerial-framed, 3 lz4 frame, 4 zstd), which
// compresses everything after the header; the other bits must be 0 (create
// time, not transactional, not control). A compressed batch is validated
// by decompressing its records (at most MaxDecompressedBytes, compress.go)
// and stored and served as it came. A record is zigzag varints: length,
// attributes (int8 0), timestampDelta, offsetDelta, key length (-1 null) +
// key, value length (-1 null) + value, header count, then per header key
// length + key, value length (-1 null) + value. franz-go's kmsg reads and
// writes the same bytes (kafka_format_test.go). A producer's batch has
// dense offset deltas 0..recordCount−1; a batch the cleaner thinned keeps
// its baseOffset and lastOffsetDelta with fewer records (gaps), and one it
// emptied is the header alone, recordCount 0, uncompressed (Kafka's
// empty batch). Both validate as stored and replicated batches, never as
// a producer's.
//
// # Idempotent producers
//
// A log keeps the state of its idempotent producers (storage/producer:
// per producer id its epoch and its last five batches' sequences and
// offsets), applied from every batch it appends and rebuilt after a
// truncation or at Open from the latest <offset>.snapshot at or below the
// LEO plus the batch headers after it. Snapshots are written at every roll
// and at Close; producers.go has the rules that keep them true, and
// storage/producer/snapshot.go their format. A leader asks CheckProducers
// before it appends (broker/serve.Propose).
//
// # Indexes
//
//	.index     [relOffset u32 | position u32] ...      every >= IndexIntervalBytes
//	.timeindex [maxTimestamp i64 | relOffset u32] ... at index points where the max grew
//
// relOffset is a batch's base offset minus the segment base. Indexes are kept
// in memory, appended to their files on Flush and fsynced on roll and Close.
// They are a cache: load checks them (sizes, monotonic, last entry points at
// a batch with that base offset) and rebuilds them by scanning when they fail.
//
// # Invariants
//
//   - Segments are sorted by base offset; the last is the active segment;
//     there is always at least one. Log start = first segment's base, LEO =
//     next offset after the last batch (or the active base when empty).
//   - A batch is never split: truncation and reads work in whole batches, so
//     TruncateTo(o) inside a batch removes the whole batch.
//   - Epoch cache entries start at or after log start and before LEO (after
//     every operation: Assign per appended batch, TruncateFromEnd on
//     truncation and recovery, TruncateFromStart on retention). The cache is
//     checkpointed before the data it describes is written: recovery can trim
//     surplus entries but could not invent missing ones.
//   - HW ∈ [logStart, LEO]. Nobody truncates to HW (SPEC §2.5); retention only
//     deletes segments wholly below HW.
//   - Recovery: without CleanShutdown, every segment from the one holding
//     RecoveryPoint on is scanned and validated; the first bad batch and
//     everything after it is cut (torn tail) and indexes rebuilt. Corruption
//     below the recovery point is data that was durable: Open returns a
//     *CorruptError rather than dropping it. RecoveryPoint therefore must come
//     from a checkpoint written after the Flush that established it.
//
// # Compaction
//
// A topic with cleanup.policy compact keeps, per key, at least its latest
// record (Kafka's log cleaner; cleaner.go drives rounds, compact.go has the
// pure rules). The log divides at the first dirty offset (the end of the
// last round, cleaner-offset-checkpoint) into a clean part, already
// compacted, and a dirty part; cleaning stops at the first uncleanable
// offset: min(active segment base, HW, the first segment with a record
// younger than min.compaction.lag.ms). A round:
//
//   - maps each key of the dirty part [first dirty, uncleanable) to its
//     latest offset, in a map bounded by the dedupe buffer; when it fills,
//     the round covers the dirty prefix that fit (its end);
//   - rewrites every non-active segment below that end, merged into groups
//     of at most SegmentMaxBytes, keeping a record unless its key has a
//     later offset in the map, it has no key, or it is a tombstone whose
//     delete horizon passed (below);
//   - swaps each group that changed in (below) and records (end, time) in
//     the checkpoint.
//
// Nothing moves: a kept record keeps its offset and bytes, a kept batch
// its baseOffset, lastOffsetDelta, leader epoch, producer fields and codec
// (thinned records are re-compressed with it), so readers see offset gaps,
// followers and mirrors copy the batches as they are
// (AppendAsFollower), the leader-epoch-checkpoint stays true, and log
// start and LEO do not change. Two kinds of batch keep their header even
// with no record left, as empty batches: an idempotent producer's last
// batch (its sequences and epoch rebuild its state; the producer state
// applies a batch's offsets, lastOffsetDelta + 1, as its sequence range),
// and the last batch of each group, so a cleaned segment ends where the
// old ones did and segments still chain (recovery checks the chain).
// Keyless records below the end go (a compacted topic refuses them at
// produce, ValidateKeyedProducerBatches; they remain only from before the
// topic was compacted).
//
// Tombstones: a tombstone deletes what is below it once the first round
// that maps it runs; a reader that saw those records must still find the
// tombstone for delete.retention.ms after that. So the tombstone at offset
// o may go in a round once the first completed round whose end is above o
// is delete.retention.ms old (KIP-534's delete horizon, kept per log in
// the checkpoint rather than in the batch, so the bytes stay as written and
// as every replica holds them). A round with nothing dirty still runs when
// a kept tombstone's horizon has passed. Losing or cutting the checkpoint
// only delays tombstones; a truncation and recovery cut it to the LEO, so
// records written again there are dirty.
//
// Swap, crash-safe (Kafka's .cleaned/.swap protocol): the group is written
// to <base>.log.cleaned and fsynced; renamed to <base>.log.swap and the
// dir fsynced (the commit); the old segments' files removed and the dir
// fsynced; the swap renamed to <base>.log, its indexes written, the dir
// fsynced. Open first removes any .cleaned file (the old segments are all
// there) and finishes any .swap: it validates it and removes every segment
// whose base lies in [its base, its next offset) before renaming it. A
// failure before the commit leaves the log as it was; after it, the log
// fails and Open finishes the swap.
//
// # Durability
//
// Appends write with pwrite and do not fsync, unless the flush policy
// (FlushMessages, FlushInterval) says so; Flush fsyncs segments with unsynced
// bytes and moves the recovery point. Roll, truncation and retention fsync
// the directory. TruncateFullyAndStartAt removes the old files and creates
// the new segment before one directory fsync: on MemFS this is atomic; on a
// journaling file system the operations reach the journal in order.
//
// # Concurrency
//
// A Log is safe for concurrent use. An RWMutex guards its state: Read,
// OffsetForTimestamp and the accessors take the read lock and run
// concurrently; appends, truncation, roll and retention take the write lock.
// Readers only see batches whose bytes were fully written (the segment size
// moves after the write). Flush fsyncs without holding that lock (a separate
// flush mutex keeps truncation and retention out meanwhile), so reads and
// appends continue during an fsync. AppendAsLeader stamps the caller's
// buffer in place. Lock order: flushMu, then mu.
//
// A cleaning round (Cleaner.Clean) holds the log's cleanMu, so one runs
// per log at a time, and plans under mu; it reads segments and writes the
// cleaned file without the log's locks (non-active segments change only by
// truncation, retention, Close and Delete, which bump segGen), stops at
// the next batch when segGen moved or its context ended, and swaps each
// group in under flushMu and mu after checking segGen again. So appends,
// reads and flushes run during a round; a truncation, retention or Close
// waits at most for one swap and makes the round stop.
package storage
