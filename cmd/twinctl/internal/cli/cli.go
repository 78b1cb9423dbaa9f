package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"google.golang.org/grpc"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/tlsfiles"
	"github.com/twinlog/twinlog/security/transport"
)

// DefaultBootstrap is used when neither --bootstrap, TWINLOG_BOOTSTRAP nor the
// config file names a server: cluster A's controller in configs/cluster-a.
const DefaultBootstrap = "127.0.0.1:9090"

// DefaultTimeout bounds every outbound RPC unless --timeout says otherwise.
const DefaultTimeout = 10 * time.Second

// Options are the process-level dependencies of Execute. The zero value uses
// the real stdio and has no batch codec or log dumper.
type Options struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Codec builds and parses SPEC §2.2 record batches for produce and
	// consume; nil makes those commands fail with an explanation.
	Codec BatchCodec
	// DumpLog reads a partition directory for dump-log; nil disables it.
	DumpLog LogDumper
	// DialOptions are appended to every grpc.NewClient call (tests inject a
	// bufconn dialer here).
	DialOptions []grpc.DialOption
	// StderrIsTerminal reports whether progress bars may be drawn; nil
	// checks os.Stderr.
	StderrIsTerminal func() bool
	// HomeDir overrides the directory searched for .twinctl.yaml.
	HomeDir string
	// Now is the clock ages are shown against (default time.Now).
	Now func() time.Time
}

// app is the state of one Execute call.
type app struct {
	opts Options
	v    *viper.Viper
	// bootstrap is --bootstrap as given (shown in messages); bootstraps
	// its addresses, tried in turn by router.
	bootstrap  string
	bootstraps []string
	router     *router
	// commandPath is the running command ("twinctl topics create"), for
	// messages.
	commandPath string
	timeout     time.Duration
	json        bool
	conns       map[string]*grpc.ClientConn
	// tls is the client's TLS (--tls-ca, --tls-cert, --tls-key); nil:
	// plaintext.
	tls *transport.Transport
	// password authenticates every RPC as --user (nil: none).
	password *basicAuth
}

// Execute runs twinctl with args (without the program name) and returns the
// process exit code. Errors are printed to opts.Stderr.
func Execute(ctx context.Context, args []string, opts Options) int {
	if opts.Stdin == nil {
		opts.Stdin = os.Stdin
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &app{opts: opts, v: viper.New(), conns: map[string]*grpc.ClientConn{}}
	defer a.closeConns()
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(opts.Stdin)
	root.SetOut(opts.Stdout)
	root.SetErr(opts.Stderr)
	err := withCommandHints(a.commandPath, root.ExecuteContext(ctx))
	if err != nil {
		fmt.Fprintf(opts.Stderr, "twinctl: %v\n", err)
		if ExitCode(err) == ExitUsage {
			fmt.Fprintln(opts.Stderr, "run `twinctl --help` for usage")
		}
	}
	return ExitCode(err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "twinctl",
		Short: "Administer twinlog clusters: topics, configs, leaders, mirrors, consumer groups, produce and consume",
		Long: `twinctl talks gRPC to a twinlog controller (admin and mirror commands) or
broker (produce, consume). The groups commands and partitions describe start
at either and then talk to the brokers it lists.

The server addresses come from --bootstrap, the TWINLOG_BOOTSTRAP environment
variable, "bootstrap:" in ~/.twinctl.yaml (or --config FILE), else ` + DefaultBootstrap + `.
A comma-separated list may name controllers and brokers: each command uses
the first address that serves it (a controller for mirror commands and
brokers unregister; a broker for produce and consume, found through a
controller's broker list if only controllers are given).

Exit codes: 0 ok, 1 error, 2 usage.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		Args:              noArgs,
		PersistentPreRunE: a.loadConfig,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("missing command; see `twinctl --help`")
		},
	}
	pf := root.PersistentFlags()
	pf.String("bootstrap", DefaultBootstrap, "controller or broker addresses host:port[,host:port...] (env TWINLOG_BOOTSTRAP)")
	pf.Duration("timeout", DefaultTimeout, "deadline of each RPC (env TWINLOG_TIMEOUT)")
	pf.Bool("json", false, "print JSON Lines (one object per line) instead of tables")
	pf.String("config", "", "config file (default ~/.twinctl.yaml)")
	pf.String("tls-ca", "", "PEM bundle of the CAs to trust: turns TLS on (env TWINLOG_TLS_CA)")
	pf.String("tls-cert", "", "client certificate, PEM, presented as your identity (env TWINLOG_TLS_CERT)")
	pf.String("tls-key", "", "private key of --tls-cert, PEM (env TWINLOG_TLS_KEY)")
	pf.String("user", "", "authenticate as this SCRAM user with a password (over TLS, without --tls-cert; env TWINLOG_USER)")
	pf.String("user-password-file", "", "the --user password's file (first line); default: env TWINLOG_PASSWORD")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })

	root.AddCommand(
		a.topicsCommand(),
		a.configsCommand(),
		a.brokersCommand(),
		a.partitionsCommand(),
		a.electLeadersCommand(),
		a.reassignCommand(),
		a.mirrorsCommand(),
		a.groupsCommand(),
		a.aclsCommand(),
		a.usersCommand(),
		a.produceCommand(),
		a.consumeCommand(),
		a.dumpLogCommand(),
	)
	return root
}

// loadConfig resolves the global settings: flag > env > config file > default.
func (a *app) loadConfig(cmd *cobra.Command, _ []string) error {
	v := a.v
	flags := cmd.Flags()
	for _, k := range []string{"bootstrap", "timeout", "json", "tls-ca", "tls-cert", "tls-key", "user", "user-password-file"} {
		if err := v.BindPFlag(k, flags.Lookup(k)); err != nil {
			return err
		}
	}
	v.SetEnvPrefix("TWINLOG")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	for _, k := range []string{"bootstrap", "timeout", "tls-ca", "tls-cert", "tls-key", "user", "user-password-file"} {
		if err := v.BindEnv(k); err != nil {
			return err
		}
	}
	path, _ := flags.GetString("config")
	explicit := path != ""
	if !explicit {
		home := a.opts.HomeDir
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		if home != "" {
			path = filepath.Join(home, ".twinctl.yaml")
		}
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			var notFound *os.PathError
			if explicit || !errors.As(err, &notFound) {
				return fmt.Errorf("read config %s: %w: fix the file or pass --config", path, err)
			}
		}
	}
	a.bootstrap = v.GetString("bootstrap")
	a.bootstraps = splitBootstrap(a.bootstrap)
	if len(a.bootstraps) == 0 {
		return usagef("--bootstrap is empty: pass host:port of a controller or broker")
	}
	a.commandPath = cmd.CommandPath()
	a.timeout = v.GetDuration("timeout")
	if a.timeout <= 0 {
		return usagef("--timeout must be positive, got %v", a.timeout)
	}
	a.json = v.GetBool("json")
	if err := a.loadTLS(v.GetString("tls-ca"), v.GetString("tls-cert"), v.GetString("tls-key")); err != nil {
		return err
	}
	if err := a.loadPassword(v.GetString("user"), v.GetString("user-password-file"), v.GetString("tls-cert")); err != nil {
		return err
	}
	return nil
}

// noArgs rejects positional arguments, naming the unknown subcommand.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s; see `%s --help`", cmd.CommandPath(), what, cmd.CommandPath())
		}
		return nil
	}
}

func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s needs %s; see `%s --help`", cmd.CommandPath(), what, cmd.CommandPath())
		}
		return nil
	}
}

// group builds a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("%s needs a subcommand; see `%s --help`", cmd.CommandPath(), cmd.CommandPath())
		},
	}
	c.AddCommand(subs...)
	return c
}

// conn returns a cached client connection to addr. grpc.NewClient connects
// lazily, so an unreachable server surfaces as codes.Unavailable on the
// first RPC, which rpcError explains.
func (a *app) conn(addr string) (*grpc.ClientConn, error) {
	if c, ok := a.conns[addr]; ok {
		return c, nil
	}
	dopts := []grpc.DialOption{grpc.WithTransportCredentials(a.tls.ClientCredentials())}
	if a.password != nil {
		dopts = append(dopts, grpc.WithPerRPCCredentials(a.password))
	}
	dopts = append(dopts, a.opts.DialOptions...)
	// passthrough: hand the address to the dialer as is, as grpc.Dial did;
	// a CLI has no use for the dns resolver's balancing.
	c, err := grpc.NewClient("passthrough:///"+addr, dopts...)
	if err != nil {
		return nil, usagef("bad address %q: %v", addr, err)
	}
	a.conns[addr] = c
	return c, nil
}

// loadTLS turns TLS on when a CA bundle is given; a certificate without its
// key (or the reverse), or a certificate without a CA, is a usage error.
func (a *app) loadTLS(ca, cert, key string) error {
	if (cert == "") != (key == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if ca == "" {
		if cert != "" {
			return usagef("--tls-cert needs --tls-ca (the CA that signed the servers' certificates)")
		}
		return nil
	}
	t, err := transport.New(transport.Config{Files: tlsfiles.Files{CertFile: cert, KeyFile: key, CAFile: ca}})
	if err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	a.tls = t
	return nil
}

// basicAuth sends a SCRAM user's password with every RPC (the gRPC API's
// alternative to a client certificate, security/authz), only over TLS.
type basicAuth struct{ header string }

func (b *basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{authz.AuthorizationHeader: b.header}, nil
}

func (b *basicAuth) RequireTransportSecurity() bool { return true }

// loadPassword sets up --user's password (from --user-password-file, else
// TWINLOG_PASSWORD); it needs TLS and excludes a client certificate.
func (a *app) loadPassword(user, file, cert string) error {
	if user == "" {
		if file != "" {
			return usagef("--user-password-file needs --user")
		}
		return nil
	}
	switch {
	case a.tls == nil:
		return usagef("--user sends a password: it needs TLS (--tls-ca)")
	case cert != "":
		return usagef("--user and --tls-cert are two identities: pass one")
	}
	var pw string
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return usagef("--user-password-file: %v", err)
		}
		defer f.Close()
		if pw, err = readPassword(f, file); err != nil {
			return err
		}
	} else if pw = os.Getenv("TWINLOG_PASSWORD"); pw == "" {
		return usagef("--user %s: pass --user-password-file or set TWINLOG_PASSWORD", user)
	}
	a.password = &basicAuth{header: "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))}
	return nil
}

func (a *app) closeConns() {
	for _, c := range a.conns {
		_ = c.Close()
	}
}

// admin is AdminService at the first --bootstrap address that serves the
// RPC (router).
func (a *app) admin() (twinlogv1.AdminServiceClient, error) {
	return twinlogv1.NewAdminServiceClient(a.bootstrapConn()), nil
}

// mirrorClient is MirrorService at the first --bootstrap controller.
func (a *app) mirrorClient() (twinlogv1.MirrorServiceClient, error) {
	return twinlogv1.NewMirrorServiceClient(a.bootstrapConn()), nil
}

// rpcCtx gives one outbound RPC its deadline (STYLE: every outbound RPC has one).
func (a *app) rpcCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

func (a *app) printer() *printer { return &printer{w: a.opts.Stdout, json: a.json} }

func (a *app) stderrIsTerminal() bool {
	if a.opts.StderrIsTerminal != nil {
		return a.opts.StderrIsTerminal()
	}
	return isTerminal(os.Stderr)
}
