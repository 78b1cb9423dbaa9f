package cli

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/scram"
)

// The users commands manage the SCRAM credentials that SASL clients of the
// Kafka listener authenticate with (SCRAM-SHA-256, SCRAM-SHA-512, and PLAIN
// checked against them), through AdminService's AlterUserScramCredentials
// and DescribeUserScramCredentials. As Kafka's AdminClient does, twinctl
// derives the salted password itself: the password never leaves it.

// scramSaltBytes is the length of a new credential's random salt.
const scramSaltBytes = 24

func (a *app) usersCommand() *cobra.Command {
	return group("users", "Set, list and delete SASL/SCRAM users (Kafka's kafka-configs --entity-type users)",
		a.usersSetPassword(), a.usersList(), a.usersDelete())
}

func parseScramMechanism(s string) (twinlogv1.ScramMechanism, error) {
	m, err := scram.ParseMechanism(strings.ToUpper(s))
	if err != nil {
		return 0, usagef("bad --mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
	}
	return twinlogv1.ScramMechanism(m.KafkaCode()), nil
}

func scramName(m twinlogv1.ScramMechanism) string {
	if sm, ok := scram.MechanismFromKafka(int8(m)); ok {
		return sm.String()
	}
	return strconv.Itoa(int(m))
}

// readPassword reads the first line of r (a file or stdin), without its
// line ending.
func readPassword(r io.Reader, from string) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the password from %s: %w", from, err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", usagef("empty password (read from %s)", from)
	}
	return pw, nil
}

func (a *app) usersSetPassword() *cobra.Command {
	var (
		mech         string
		iterations   int
		passwordFile string
	)
	c := &cobra.Command{
		Use:   "set-password USER [--mechanism SCRAM-SHA-512] [--iterations 8192] [--password-file FILE]",
		Short: "Create a SASL/SCRAM user or change its password",
		Long: `Sets USER's credential for one SCRAM mechanism: twinctl draws a random salt,
derives the salted password (PBKDF2, --iterations rounds) and sends that, never
the password. The password is the first line of --password-file, else of
standard input. Kafka clients then authenticate as User:USER with that
mechanism, or with PLAIN over TLS.`,
		Example: `  echo 'correct horse' | twinctl users set-password alice
  twinctl users set-password etl --mechanism SCRAM-SHA-256 --password-file etl.pw`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := parseScramMechanism(mech)
			if err != nil {
				return err
			}
			if iterations < scram.MinIterations || iterations > scram.MaxIterations {
				return usagef("--iterations %d: want %d to %d", iterations, scram.MinIterations, scram.MaxIterations)
			}
			in, from := a.opts.Stdin, "standard input"
			if passwordFile != "" {
				f, err := os.Open(passwordFile)
				if err != nil {
					return usagef("--password-file: %v", err)
				}
				defer f.Close()
				in, from = f, passwordFile
			}
			pw, err := readPassword(in, from)
			if err != nil {
				return err
			}
			salt := make([]byte, scramSaltBytes)
			if _, err := rand.Read(salt); err != nil {
				return err
			}
			sm, _ := scram.MechanismFromKafka(int8(m))
			salted, err := scram.SaltedPassword(sm, pw, salt, iterations)
			if err != nil {
				return err
			}
			resp, err := a.alterScram(cmd, &twinlogv1.AlterUserScramCredentialsRequest{Upsertions: []*twinlogv1.ScramCredentialUpsertion{{
				Name: args[0], Mechanism: m, Iterations: int32(iterations), Salt: salt, SaltedPassword: salted}}})
			if err != nil {
				return err
			}
			for _, r := range resp.GetResults() {
				if err := protoErr(r.GetError(), "user "+r.GetUser(), r.GetErrorMessage(), ""); err != nil {
					return err
				}
			}
			return a.userResult(args[0], "set", scramName(m), iterations)
		},
	}
	c.Flags().StringVar(&mech, "mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	c.Flags().IntVar(&iterations, "iterations", 8192, "PBKDF2 rounds, 4096 to 16384")
	c.Flags().StringVar(&passwordFile, "password-file", "", "read the password from this file's first line (default: standard input)")
	return c
}

// userRow is one credential of `users list` and a change of set-password
// and delete.
type userRow struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int    `json:"iterations,omitempty"`
	Result     string `json:"result,omitempty"`
}

func (a *app) userResult(user, result, mech string, iterations int) error {
	p := a.printer()
	row := userRow{User: user, Mechanism: mech, Iterations: iterations, Result: result}
	if p.json {
		return jsonLine{w: p.w}.write(row)
	}
	fmt.Fprintf(p.w, "user %s: %s credential %s", user, mech, result)
	if iterations > 0 {
		fmt.Fprintf(p.w, " (%d iterations)", iterations)
	}
	fmt.Fprintln(p.w)
	return nil
}

func (a *app) alterScram(cmd *cobra.Command, req *twinlogv1.AlterUserScramCredentialsRequest) (*twinlogv1.AlterUserScramCredentialsResponse, error) {
	client, err := a.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.rpcCtx(cmd.Context())
	defer cancel()
	resp, err := client.AlterUserScramCredentials(ctx, req)
	if err != nil {
		return nil, rpcError(err, a.bootstrap, "alter SCRAM credentials")
	}
	return resp, nil
}

func (a *app) describeScram(cmd *cobra.Command, users []string) (*twinlogv1.DescribeUserScramCredentialsResponse, error) {
	client, err := a.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.rpcCtx(cmd.Context())
	defer cancel()
	resp, err := client.DescribeUserScramCredentials(ctx, &twinlogv1.DescribeUserScramCredentialsRequest{Users: users})
	if err != nil {
		return nil, rpcError(err, a.bootstrap, "describe SCRAM credentials")
	}
	if err := protoErr(resp.GetError(), "users", resp.GetErrorMessage(), ""); err != nil {
		return nil, err
	}
	return resp, nil
}

func (a *app) usersList() *cobra.Command {
	return &cobra.Command{
		Use:   "list [USER...]",
		Short: "List SASL/SCRAM users and their mechanisms (never their keys)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := a.describeScram(cmd, args)
			if err != nil {
				return err
			}
			var rows []userRow
			var missing []error
			for _, r := range resp.GetResults() {
				if err := protoErr(r.GetError(), "user "+r.GetUser(), r.GetErrorMessage(), ""); err != nil {
					missing = append(missing, err)
					continue
				}
				for _, c := range r.GetCredentials() {
					rows = append(rows, userRow{User: r.GetUser(), Mechanism: scramName(c.GetMechanism()), Iterations: int(c.GetIterations())})
				}
			}
			p := a.printer()
			if p.json {
				for _, r := range rows {
					if err := (jsonLine{w: p.w}).write(r); err != nil {
						return err
					}
				}
			} else {
				table := make([][]string, len(rows))
				for i, r := range rows {
					table[i] = []string{r.User, r.Mechanism, strconv.Itoa(r.Iterations)}
				}
				if err := p.table([]string{"USER", "MECHANISM", "ITERATIONS"}, table); err != nil {
					return err
				}
			}
			if len(missing) > 0 {
				return missing[0]
			}
			return nil
		},
	}
}

func (a *app) usersDelete() *cobra.Command {
	var mech string
	c := &cobra.Command{
		Use:   "delete USER [--mechanism M]",
		Short: "Delete a SASL/SCRAM user's credentials (all mechanisms, or one)",
		Long: `Deletes USER's credential for --mechanism, or every credential USER has.
Connections already authenticated stay so until they close; ACL bindings
naming User:USER are not removed (twinctl acls remove --principal User:USER).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			user := args[0]
			var mechs []twinlogv1.ScramMechanism
			if mech != "" {
				m, err := parseScramMechanism(mech)
				if err != nil {
					return err
				}
				mechs = []twinlogv1.ScramMechanism{m}
			} else {
				resp, err := a.describeScram(cmd, []string{user})
				if err != nil {
					return err
				}
				for _, r := range resp.GetResults() {
					if err := protoErr(r.GetError(), "user "+user, r.GetErrorMessage(), ""); err != nil {
						return err
					}
					for _, c := range r.GetCredentials() {
						mechs = append(mechs, c.GetMechanism())
					}
				}
			}
			req := &twinlogv1.AlterUserScramCredentialsRequest{}
			for _, m := range mechs {
				req.Deletions = append(req.Deletions, &twinlogv1.ScramCredentialDeletion{Name: user, Mechanism: m})
			}
			resp, err := a.alterScram(cmd, req)
			if err != nil {
				return err
			}
			for _, r := range resp.GetResults() {
				if err := protoErr(r.GetError(), "user "+r.GetUser(), r.GetErrorMessage(), ""); err != nil {
					return err
				}
			}
			for _, m := range mechs {
				if err := a.userResult(user, "deleted", scramName(m), 0); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&mech, "mechanism", "", "delete only this mechanism's credential (SCRAM-SHA-256 or SCRAM-SHA-512)")
	return c
}
