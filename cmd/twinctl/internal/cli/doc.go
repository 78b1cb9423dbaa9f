// Package cli implements twinctl, the twinlog admin CLI. cmd/twinctl/main.go
// only calls Execute; everything else (flags, config, RPCs, rendering) lives
// here so tests can run commands in-process against fake gRPC servers.
//
// Contract:
//   - Exit codes: 0 ok, 1 error (transport, protocol or server-side
//     rejection), 2 usage (bad flags, arguments or selectors). See ExitCode.
//   - Every outbound RPC runs under context.WithTimeout(--timeout); consume
//     --follow long-polls with a per-request deadline of max-wait + --timeout.
//     The groups commands also bound each group's requests, retries
//     included, by one --timeout: a coordinator that moved or is loading
//     (the error table's retriable codes) is found again, at most
//     groupAttempts times.
//   - The bootstrap addresses come from --bootstrap, then TWINLOG_BOOTSTRAP,
//     then `bootstrap:` in ~/.twinctl.yaml (or --config), then 127.0.0.1:9090.
//     A comma-separated list may mix controllers and brokers: the router
//     (bootstrap.go) sends each RPC to the first address that serves it,
//     finds brokers through a controller's ListBrokers, and otherwise says
//     which kind of server the command needs.
//   - Tables go to stdout; --json prints JSON Lines everywhere: one compact
//     object per line (a table row, a result, a record), snake_case keys.
//     Errors go to stderr and say what to do next; a hint names a flag of
//     the command at hand (commandHints, hints_test.go).
//   - Consumer groups (groups.go) live on the brokers: the groups commands
//     find them with ListBrokers on the bootstrap server (controller or
//     broker), then use GroupService at each group's coordinator
//     (FindCoordinator) and ListOffsets at the partitions' leaders.
//   - DescribeTopicPartitions paging (SPEC §5): the pager splits long topic
//     lists into chunks, follows nextCursor while the error is
//     REQUEST_LIMIT_REACHED, checks that the cursor advances and merges the
//     pages per topic.
//
// Record batches (SPEC §2.2) and on-disk segments are not decoded here: the
// caller injects a BatchCodec and a LogDumper (Options) so the CLI does not
// carry a second copy of the storage codec.
//
// Nothing here is safe for concurrent use; one Execute call runs one command.
package cli
