package cli

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/acl"
)

// The acls commands manage the cluster's ACL bindings with AdminService's
// CreateAcls, DescribeAcls and DeleteAcls, which the controller serves (a
// broker forwards them). Their flags are kafka-acls.sh's; security/acl
// names, parses and checks the bindings, so the names printed are Kafka's
// ("Topic", "Read", "Allow", "Literal").

func (a *app) aclsCommand() *cobra.Command {
	c := group("acls", "Add, list and remove ACL bindings (Kafka's kafka-acls.sh)",
		a.aclsAdd(), a.aclsList(), a.aclsRemove())
	c.Long = `An ACL binding allows or denies a principal ("User:alice"; "User:*" for
every user), connecting from a host ("*" for any, else an IP address), one
operation on a resource: a topic, a group, the cluster, a transactional id or
a mirror link. A Literal binding names one resource ("*" for every resource of
its type), a Prefixed one every resource whose name starts with its name. Deny
wins over allow. The controller keeps the bindings; a broker forwards these
commands to it.

Names are Kafka's and are matched without regard to case or to '-' and '_'
between words: Read, read, describe-configs, DESCRIBE_CONFIGS.`
	return c
}

// ---- names and checks ----

// aclEnum is one of security/acl's enums.
type aclEnum interface {
	~int8
	fmt.Stringer
}

// parseACLChoice parses the value of flag with parse and accepts it only if
// it is one of allowed; the usage error lists the accepted names.
func parseACLChoice[T aclEnum](flag, s string, parse func(string) (T, error), allowed ...T) (T, error) {
	if v, err := parse(s); err == nil && slices.Contains(allowed, v) {
		return v, nil
	}
	return 0, usagef("bad %s %q: want one of %s (any case; words may be separated by '-' or '_')", flag, s, joinACLNames(allowed))
}

func joinACLNames[T fmt.Stringer](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, ", ")
}

// wrapWords breaks s into lines of at most width characters (longer words
// stay whole), each starting with indent.
func wrapWords(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
			b.WriteString(indent)
			n = len(indent)
		case n+1+len(w) > width:
			b.WriteString("\n" + indent)
			n = len(indent)
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// bindingOperations are the operations some resource type takes, in code
// order: those a binding may have.
func bindingOperations() []acl.Operation {
	var out []acl.Operation
	for _, t := range acl.ResourceTypes() {
		for _, o := range acl.Operations(t) {
			if !slices.Contains(out, o) {
				out = append(out, o)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkPrincipal checks the "Type:name" form of a principal flag's value.
func checkPrincipal(flag, p string) error {
	if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
		return usagef(`bad %s %q: want Type:name, such as User:alice (User:* for every user)`, flag, p)
	}
	return nil
}

// hostOf checks that a host flag's value is "*" or an IP address and
// returns it as the controller stores it: an address in its canonical form,
// an IPv4-mapped IPv6 address as IPv4.
func hostOf(flag, h string) (string, error) {
	if h == acl.Wildcard {
		return h, nil
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return "", usagef(`bad %s %q: want "*" (any host) or an IP address; host names are not resolved`, flag, h)
	}
	return a.Unmap().String(), nil
}

// ---- resources ----

// aclResource is one resource named on the command line.
type aclResource struct {
	typ  acl.ResourceType
	name string
	flag string // "--topic"
}

// aclResourceFlags are the flags that name a resource.
type aclResourceFlags struct {
	topic, group, txn, mirror string
	cluster                   bool
}

// add defines the flags; verb ends their help ("to grant on"), and every
// says what "*" means (add) or "" (filters, where "*" is only the name of
// the wildcard bindings).
func (r *aclResourceFlags) add(c *cobra.Command, verb string, every bool) {
	star := func(what string) string {
		if !every {
			return ""
		}
		return " (\"*\": every " + what + ")"
	}
	f := c.Flags()
	f.StringVar(&r.topic, "topic", "", "topic "+verb+star("topic"))
	f.StringVar(&r.group, "group", "", "consumer group "+verb+star("group"))
	f.BoolVar(&r.cluster, "cluster", false, "the cluster itself ("+acl.ClusterName+")")
	f.StringVar(&r.txn, "transactional-id", "", "transactional id "+verb+star("transactional id"))
	f.StringVar(&r.mirror, "mirror", "", "mirror link "+verb+star("mirror link"))
}

// resources lists the resources given, in resource type order.
func (r *aclResourceFlags) resources(cmd *cobra.Command) ([]aclResource, error) {
	var out []aclResource
	for _, x := range []aclResource{
		{acl.Topic, r.topic, "--topic"},
		{acl.Group, r.group, "--group"},
		{acl.Cluster, acl.ClusterName, "--cluster"},
		{acl.TransactionalID, r.txn, "--transactional-id"},
		{acl.Mirror, r.mirror, "--mirror"},
	} {
		if x.typ == acl.Cluster {
			if r.cluster {
				out = append(out, x)
			}
			continue
		}
		if !cmd.Flags().Changed(strings.TrimPrefix(x.flag, "--")) {
			continue
		}
		if x.name == "" {
			return nil, usagef("%s needs a name", x.flag)
		}
		out = append(out, x)
	}
	return out, nil
}

func resourceFlagList(rs []aclResource) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.flag
	}
	return strings.Join(s, " and ")
}

const aclResourceChoices = "--topic NAME, --group NAME, --cluster, --transactional-id NAME or --mirror NAME"

// ---- proto conversions and views ----

// The conversions between acl.Binding/Filter and their messages are
// metadata's (ACLRecord, ACLBinding, ACLFilterRecord), the controller's own.
var (
	aclToProto       = metadata.ACLRecord
	aclFilterToProto = metadata.ACLFilterRecord
	aclFromProto     = metadata.ACLBinding
)

// aclView is the JSON shape of one binding (and a table row's first cells).
type aclView struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
}

func aclViewOf(b acl.Binding) aclView {
	return aclView{b.Principal, b.Host, b.Operation.String(), b.Permission.String(),
		b.ResourceType.String(), b.ResourceName, b.PatternType.String()}
}

func (v aclView) cells() []string {
	return []string{v.Principal, v.Host, v.Operation, v.Permission, v.ResourceType, v.ResourceName, v.PatternType}
}

var aclHeaders = []string{"PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN-TYPE"}

// aclSubject names a binding in an error.
func aclSubject(b acl.Binding) string { return "acl " + b.String() }

// renderACLRows prints one line per binding: with --json rows[i] as one
// JSON object per line, else a table of the bindings with a RESULT column
// when result is not nil.
func renderACLRows[R any](p *printer, views []aclView, rows []R, result func(i int) string) error {
	if p.json {
		enc := jsonLine{w: p.w}
		for _, r := range rows {
			if err := enc.write(r); err != nil {
				return err
			}
		}
		return nil
	}
	headers := aclHeaders
	if result != nil {
		headers = append(slices.Clip(aclHeaders), "RESULT")
	}
	table := make([][]string, 0, len(views))
	for i, v := range views {
		cells := v.cells()
		if result != nil {
			cells = append(cells, result(i))
		}
		table = append(table, cells)
	}
	return p.table(headers, table)
}

// ---- add ----

// hostsOf returns the hosts of a repeatable host flag (see hostOf), "*"
// when there are none.
func hostsOf(flag string, hs []string) ([]string, error) {
	if len(hs) == 0 {
		return []string{acl.Wildcard}, nil
	}
	out := make([]string, len(hs))
	for i, h := range hs {
		var err error
		if out[i], err = hostOf(flag, h); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// aclAddSpec is what `acls add` was asked for.
type aclAddSpec struct {
	resources                       []aclResource
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	operations                      []string
	pattern                         string
	producer, consumer              bool
}

// aclGrant is one operation on one resource pattern, before principals
// and hosts multiply it into bindings.
type aclGrant struct {
	typ     acl.ResourceType
	name    string
	pattern acl.PatternType
	op      acl.Operation
}

// bindings expands the spec into the bindings to create, in the order
// DescribeAcls lists them, without duplicates.
func (s aclAddSpec) bindings() ([]acl.Binding, error) {
	if len(s.allowPrincipals)+len(s.denyPrincipals) == 0 {
		return nil, usagef("say who: pass --allow-principal Type:name or --deny-principal Type:name (such as User:alice; User:* for every user)")
	}
	for _, p := range s.allowPrincipals {
		if err := checkPrincipal("--allow-principal", p); err != nil {
			return nil, err
		}
	}
	for _, p := range s.denyPrincipals {
		if err := checkPrincipal("--deny-principal", p); err != nil {
			return nil, err
		}
	}
	if len(s.allowHosts) > 0 && len(s.allowPrincipals) == 0 {
		return nil, usagef("--allow-host needs --allow-principal: it says where the allowed principals may connect from")
	}
	if len(s.denyHosts) > 0 && len(s.denyPrincipals) == 0 {
		return nil, usagef("--deny-host needs --deny-principal: it says where the denied principals may not connect from")
	}
	allowHosts, err := hostsOf("--allow-host", s.allowHosts)
	if err != nil {
		return nil, err
	}
	denyHosts, err := hostsOf("--deny-host", s.denyHosts)
	if err != nil {
		return nil, err
	}
	pattern, err := parseACLChoice("--resource-pattern-type", s.pattern, acl.ParsePatternType, acl.Literal, acl.Prefixed)
	if err != nil {
		return nil, err
	}
	var grants []aclGrant
	if s.producer || s.consumer {
		grants, err = s.convenienceGrants(pattern)
	} else {
		grants, err = s.operationGrants(pattern)
	}
	if err != nil {
		return nil, err
	}
	var out []acl.Binding
	for _, g := range grants {
		for _, perm := range []struct {
			p          acl.Permission
			who, froms []string
		}{{acl.Allow, s.allowPrincipals, allowHosts}, {acl.Deny, s.denyPrincipals, denyHosts}} {
			for _, who := range perm.who {
				for _, from := range perm.froms {
					b := acl.Binding{ResourceType: g.typ, ResourceName: g.name, PatternType: g.pattern,
						Principal: who, Host: from, Operation: g.op, Permission: perm.p}
					if err := b.Validate(); err != nil {
						return nil, usagef("cannot add %v: %v", b, err)
					}
					out = append(out, b)
				}
			}
		}
	}
	return acl.SortBindings(out), nil
}

// operationGrants are the --operation flags on the one resource named.
func (s aclAddSpec) operationGrants(pattern acl.PatternType) ([]aclGrant, error) {
	switch len(s.resources) {
	case 0:
		return nil, usagef("name the resource: %s", aclResourceChoices)
	case 1:
	default:
		return nil, usagef("pass one resource, not %s (only --producer and --consumer combine resources)", resourceFlagList(s.resources))
	}
	r := s.resources[0]
	if len(s.operations) == 0 {
		return nil, usagef("pass --operation OP (repeatable), or --producer or --consumer")
	}
	if r.typ == acl.Cluster {
		if pattern == acl.Prefixed {
			return nil, usagef("--cluster is always Literal: drop --resource-pattern-type %s", s.pattern)
		}
		pattern = acl.Literal
	}
	var grants []aclGrant
	for _, name := range s.operations {
		op, err := parseACLChoice("--operation", name, acl.ParseOperation, bindingOperations()...)
		if err != nil {
			return nil, err
		}
		if !op.ValidFor(r.typ) {
			return nil, usagef("--operation %v does not apply to %s: a %v binding takes %s", op, r.flag, r.typ, joinACLNames(acl.Operations(r.typ)))
		}
		grants = append(grants, aclGrant{r.typ, r.name, pattern, op})
	}
	return grants, nil
}

// convenienceGrants are kafka-acls.sh's --producer and --consumer: a
// producer may Write, Describe and Create the topic and IdempotentWrite on
// the cluster (and Write and Describe its --transactional-id); a consumer
// may Read and Describe the topic and Read its group. The cluster binding
// is Literal whatever --resource-pattern-type says.
func (s aclAddSpec) convenienceGrants(pattern acl.PatternType) ([]aclGrant, error) {
	var topic, group, txn string
	for _, r := range s.resources {
		switch r.typ {
		case acl.Topic:
			topic = r.name
		case acl.Group:
			group = r.name
		case acl.TransactionalID:
			txn = r.name
		case acl.Cluster:
			return nil, usagef("--producer and --consumer take no --cluster (--producer adds IdempotentWrite on the cluster itself)")
		default:
			return nil, usagef("--producer and --consumer take no %s", r.flag)
		}
	}
	switch {
	case len(s.operations) > 0:
		return nil, usagef("--producer and --consumer choose the operations themselves: drop --operation")
	case len(s.denyPrincipals) > 0:
		return nil, usagef("--producer and --consumer only allow: use --allow-principal, not --deny-principal")
	case topic == "":
		return nil, usagef("%s needs --topic NAME", producerConsumerFlags(s.producer, s.consumer))
	case s.consumer && group == "":
		return nil, usagef("--consumer needs --group NAME as well as --topic: a consumer reads the topic and joins the group")
	case group != "" && !s.consumer:
		return nil, usagef("--group goes with --consumer; --producer takes --topic and --transactional-id")
	case txn != "" && !s.producer:
		return nil, usagef("--transactional-id goes with --producer; --consumer takes --topic and --group")
	}
	var grants []aclGrant
	if s.producer {
		for _, op := range []acl.Operation{acl.Write, acl.Describe, acl.Create} {
			grants = append(grants, aclGrant{acl.Topic, topic, pattern, op})
		}
		grants = append(grants, aclGrant{acl.Cluster, acl.ClusterName, acl.Literal, acl.IdempotentWrite})
		if txn != "" {
			grants = append(grants, aclGrant{acl.TransactionalID, txn, pattern, acl.Write}, aclGrant{acl.TransactionalID, txn, pattern, acl.Describe})
		}
	}
	if s.consumer {
		grants = append(grants, aclGrant{acl.Topic, topic, pattern, acl.Read}, aclGrant{acl.Topic, topic, pattern, acl.Describe},
			aclGrant{acl.Group, group, pattern, acl.Read})
	}
	return grants, nil
}

func producerConsumerFlags(producer, consumer bool) string {
	switch {
	case producer && consumer:
		return "--producer --consumer"
	case producer:
		return "--producer"
	}
	return "--consumer"
}

// aclAddRow is one binding of `acls add`'s output.
type aclAddRow struct {
	aclView
	Created bool   `json:"created"`
	DryRun  bool   `json:"dry_run"`
	Error   string `json:"error,omitempty"`
	Message string `json:"error_message,omitempty"`
}

func (a *app) aclsAdd() *cobra.Command {
	var (
		spec   aclAddSpec
		res    aclResourceFlags
		dryRun bool
	)
	c := &cobra.Command{
		Use:   "add (--allow-principal P | --deny-principal P)... [--allow-host IP | --deny-host IP]... (--operation OP... RESOURCE | --producer --topic T | --consumer --topic T --group G) [--resource-pattern-type literal|prefixed] [--dry-run]",
		Short: "Create ACL bindings",
		Long: `Creates one binding per principal, host and operation on one resource:
--topic NAME, --group NAME, --cluster, --transactional-id NAME or
--mirror NAME. Each --allow-principal gets an Allow binding from each
--allow-host, each --deny-principal a Deny binding from each --deny-host;
hosts default to "*".

Operations (each resource type takes only some of them; a group has no Write):
` + wrapWords(joinACLNames(bindingOperations()), 76, "  ") + `
All stands for every operation. Read, Write, Delete and Alter imply Describe,
and AlterConfigs implies DescribeConfigs.

As in kafka-acls.sh, --producer allows Write, Describe and Create on --topic
and IdempotentWrite on the cluster (and Write and Describe on
--transactional-id if given); --consumer allows Read and Describe on --topic
and Read on --group. --resource-pattern-type prefixed makes the topic, group
and transactional id prefixes; the cluster binding stays Literal.

Prints one line per binding in the order ` + "`twinctl acls list`" + ` shows them, and
fails if the controller refused any. A binding that exists already is
reported created and changes nothing. --dry-run prints the bindings and sends
nothing.`,
		Example: `  twinctl acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
  twinctl acls add --allow-principal User:etl --producer --topic logs. --resource-pattern-type prefixed
  twinctl acls add --allow-principal User:app --consumer --topic orders --group orders-app
  twinctl acls add --deny-principal 'User:*' --deny-host 10.0.0.66 --operation All --cluster
  twinctl acls add --allow-principal User:b-mirror --operation Read --mirror a-to-b`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if spec.resources, err = res.resources(cmd); err != nil {
				return err
			}
			bindings, err := spec.bindings()
			if err != nil {
				return err
			}
			views := make([]aclView, len(bindings))
			rows := make([]aclAddRow, len(bindings))
			for i, b := range bindings {
				views[i] = aclViewOf(b)
				rows[i] = aclAddRow{aclView: views[i], DryRun: dryRun}
			}
			result := func(i int) string {
				switch r := rows[i]; {
				case r.Error != "":
					return "not created: " + r.Error
				case r.DryRun:
					return "dry run"
				}
				return "created"
			}
			if dryRun {
				return renderACLRows(a.printer(), views, rows, result)
			}
			client, err := a.admin()
			if err != nil {
				return err
			}
			req := &twinlogv1.CreateAclsRequest{}
			for _, b := range bindings {
				req.Creations = append(req.Creations, aclToProto(b))
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.CreateAcls(ctx, req)
			if err != nil {
				return rpcError(err, a.bootstrap, "create acls")
			}
			var errs []error
			results := resp.GetResults()
			for i, b := range bindings {
				if i >= len(results) {
					rows[i].Error = "NO_ANSWER"
					errs = append(errs, fmt.Errorf("%s: the controller answered nothing for it; check with `twinctl acls list`", aclSubject(b)))
					continue
				}
				if c := results[i].GetError(); c != twinlogv1.ErrorCode_ERROR_CODE_NONE {
					rows[i].Error, rows[i].Message = codeName(c), results[i].GetErrorMessage()
					errs = append(errs, protoErr(c, aclSubject(b), results[i].GetErrorMessage(), ""))
					continue
				}
				rows[i].Created = true
			}
			if err := renderACLRows(a.printer(), views, rows, result); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&spec.allowPrincipals, "allow-principal", nil, "principal to allow, Type:name such as User:alice; User:* for every user (repeatable)")
	f.StringArrayVar(&spec.denyPrincipals, "deny-principal", nil, "principal to deny, Type:name (repeatable)")
	f.StringArrayVar(&spec.allowHosts, "allow-host", nil, "IP address the allowed principals may connect from (repeatable; default \"*\", any host)")
	f.StringArrayVar(&spec.denyHosts, "deny-host", nil, "IP address the denied principals may not connect from (repeatable; default \"*\", any host)")
	f.StringArrayVar(&spec.operations, "operation", nil, "operation to allow or deny, such as Read, Write, Describe or All (repeatable)")
	res.add(c, "to grant on", true)
	f.StringVar(&spec.pattern, "resource-pattern-type", "literal", "literal (the name exactly; \"*\" every resource) or prefixed (every name starting with it)")
	f.BoolVar(&spec.producer, "producer", false, "allow producing to --topic: Write, Describe, Create on it and IdempotentWrite on the cluster")
	f.BoolVar(&spec.consumer, "consumer", false, "allow consuming --topic in --group: Read, Describe on the topic and Read on the group")
	f.BoolVar(&dryRun, "dry-run", false, "print the bindings and create nothing")
	return c
}

// ---- list and remove ----

// aclFilterFlags are the flags of list and remove that select bindings.
type aclFilterFlags struct {
	res                                    aclResourceFlags
	resourceType, pattern                  string
	principal, host, operation, permission string
}

func (ff *aclFilterFlags) add(c *cobra.Command, verb string) {
	ff.res.add(c, verb, false)
	f := c.Flags()
	f.StringVar(&ff.resourceType, "resource-type", "any", "every resource of a type: any, topic, group, cluster, transactional-id, mirror, ...")
	f.StringVar(&ff.pattern, "resource-pattern-type", "any",
		"any (bindings with exactly the resource name, of any pattern type), match (those that apply to the named resource: literal, \"*\" and prefixes), literal or prefixed")
	f.StringVar(&ff.principal, "principal", "", "only bindings of this principal, Type:name (User:* selects only the bindings for every user)")
	f.StringVar(&ff.host, "host", "", "only bindings for this host, \"*\" or an IP address")
	f.StringVar(&ff.operation, "operation", "any", "only bindings of this operation (All selects only the All bindings)")
	f.StringVar(&ff.permission, "permission", "any", "any, allow or deny")
}

// filter builds the filter the flags describe.
func (ff *aclFilterFlags) filter(cmd *cobra.Command) (acl.Filter, error) {
	f := acl.AnyFilter()
	rs, err := ff.res.resources(cmd)
	if err != nil {
		return f, err
	}
	typeSet := cmd.Flags().Changed("resource-type")
	if len(rs) > 1 || (len(rs) == 1 && typeSet) {
		given := resourceFlagList(rs)
		if typeSet {
			given += " and --resource-type"
		}
		return f, usagef("pass at most one of %s, or --resource-type TYPE; not %s", aclResourceChoices, strings.TrimPrefix(given, " and "))
	}
	if len(rs) == 1 {
		f.ResourceType, f.ResourceName = rs[0].typ, rs[0].name
	}
	if typeSet {
		if f.ResourceType, err = parseACLChoice("--resource-type", ff.resourceType, acl.ParseResourceType, append([]acl.ResourceType{acl.AnyResourceType}, acl.ResourceTypes()...)...); err != nil {
			return f, err
		}
	}
	if f.PatternType, err = parseACLChoice("--resource-pattern-type", ff.pattern, acl.ParsePatternType, acl.AnyPatternType, acl.Match, acl.Literal, acl.Prefixed); err != nil {
		return f, err
	}
	if f.Operation, err = parseACLChoice("--operation", ff.operation, acl.ParseOperation, append([]acl.Operation{acl.AnyOperation}, bindingOperations()...)...); err != nil {
		return f, err
	}
	if f.Permission, err = parseACLChoice("--permission", ff.permission, acl.ParsePermission, acl.AnyPermission, acl.Allow, acl.Deny); err != nil {
		return f, err
	}
	if cmd.Flags().Changed("principal") {
		if err := checkPrincipal("--principal", ff.principal); err != nil {
			return f, err
		}
		f.Principal = ff.principal
	}
	if cmd.Flags().Changed("host") {
		if f.Host, err = hostOf("--host", ff.host); err != nil {
			return f, err
		}
	}
	if err := f.Validate(); err != nil {
		return f, usagef("%v", err)
	}
	return f, nil
}

// filterTerms words the conditions of f that select anything less than
// every binding, such as "principal=User:bob resource-type=Topic"; "" for
// none.
func filterTerms(f acl.Filter) string {
	var terms []string
	add := func(key, value string) {
		if strings.ContainsAny(value, " \t\"=") || value == "" {
			value = strconv.Quote(value)
		}
		terms = append(terms, key+"="+value)
	}
	if f.Principal != "" {
		add("principal", f.Principal)
	}
	if f.Host != "" {
		add("host", f.Host)
	}
	if f.Operation != acl.AnyOperation {
		add("operation", f.Operation.String())
	}
	if f.Permission != acl.AnyPermission {
		add("permission", f.Permission.String())
	}
	if f.ResourceType != acl.AnyResourceType {
		add("resource-type", f.ResourceType.String())
	}
	if f.ResourceName != "" {
		add("resource-name", f.ResourceName)
	}
	if f.PatternType != acl.AnyPatternType {
		add("pattern-type", f.PatternType.String())
	}
	return strings.Join(terms, " ")
}

// filterSubject names the bindings f selects in an error.
func filterSubject(f acl.Filter) string {
	if t := filterTerms(f); t != "" {
		return "acls matching " + t
	}
	return "acls"
}

// selectsEverything reports whether f matches every binding.
func selectsEverything(f acl.Filter) bool {
	return f.ResourceType == acl.AnyResourceType && f.ResourceName == "" &&
		(f.PatternType == acl.AnyPatternType || f.PatternType == acl.Match) &&
		f.Principal == "" && f.Host == "" && f.Operation == acl.AnyOperation && f.Permission == acl.AnyPermission
}

// describeACLs asks for the bindings f matches.
func (a *app) describeACLs(cmd *cobra.Command, f acl.Filter) ([]acl.Binding, error) {
	client, err := a.admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.rpcCtx(cmd.Context())
	defer cancel()
	resp, err := client.DescribeAcls(ctx, &twinlogv1.DescribeAclsRequest{Filter: aclFilterToProto(f)})
	if err != nil {
		return nil, rpcError(err, a.bootstrap, "describe acls")
	}
	if err := protoErr(resp.GetError(), filterSubject(f), resp.GetErrorMessage(), ""); err != nil {
		return nil, err
	}
	out := make([]acl.Binding, 0, len(resp.GetAcls()))
	for _, b := range resp.GetAcls() {
		out = append(out, aclFromProto(b))
	}
	return out, nil
}

const aclFilterHelp = `With no flag every binding is selected. --topic, --group, --cluster,
--transactional-id and --mirror select by resource, with
--resource-pattern-type (default any):
  any       bindings with exactly that resource name, Literal or Prefixed
  match     the bindings that apply to that resource: Literal ones with its
            name or "*", and Prefixed ones whose name is a prefix of it
  literal   Literal bindings with that name ("*" is the wildcard binding)
  prefixed  Prefixed bindings with that name
--resource-type TYPE selects every binding on a resource type instead.
--principal, --host, --operation and --permission must equal the binding's:
--principal User:* selects the bindings for every user, not every binding,
and --operation All the All bindings.`

func (a *app) aclsList() *cobra.Command {
	var ff aclFilterFlags
	c := &cobra.Command{
		Use:   "list [--principal P] [--topic T | --group G | --cluster | --transactional-id T | --mirror M | --resource-type TYPE] [--resource-pattern-type any|match|literal|prefixed] [--operation OP] [--permission allow|deny] [--host IP]",
		Short: "List ACL bindings",
		Long: `Lists the bindings the flags select, in the controller's order (resource
type, pattern type, resource name, principal, host, operation, permission);
--json prints one object per binding per line.

` + aclFilterHelp,
		Example: `  twinctl acls list
  twinctl acls list --principal User:alice
  twinctl acls list --topic orders --resource-pattern-type match   # what applies to topic orders
  twinctl acls list --resource-type group --permission deny --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := ff.filter(cmd)
			if err != nil {
				return err
			}
			bindings, err := a.describeACLs(cmd, f)
			if err != nil {
				return err
			}
			views := make([]aclView, len(bindings))
			for i, b := range bindings {
				views[i] = aclViewOf(b)
			}
			return renderACLRows(a.printer(), views, views, nil)
		},
	}
	ff.add(c, "whose bindings to list")
	return c
}

// aclRemoveRow is one binding of `acls remove`'s output.
type aclRemoveRow struct {
	aclView
	Removed bool `json:"removed"`
	DryRun  bool `json:"dry_run"`
}

func (a *app) aclsRemove() *cobra.Command {
	var (
		ff       aclFilterFlags
		all, yes bool
		dryRun   bool
	)
	c := &cobra.Command{
		Use:   "remove (FILTER FLAGS... | --all --yes) [--dry-run]",
		Short: "Remove the ACL bindings a filter selects",
		Long: `Removes the bindings the flags select (the flags of ` + "`twinctl acls list`" + `) and
prints those the controller removed. At least one flag must narrow the
selection: removing every binding takes --all and --yes. --dry-run lists
what would be removed and changes nothing; ` + "`twinctl acls list`" + ` with the same
flags shows the same.

` + aclFilterHelp,
		Example: `  twinctl acls remove --principal User:alice --topic orders --dry-run
  twinctl acls remove --principal User:alice --topic orders
  twinctl acls remove --topic logs. --resource-pattern-type prefixed --permission deny
  twinctl acls remove --all --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := ff.filter(cmd)
			if err != nil {
				return err
			}
			switch everything := selectsEverything(f); {
			case all && !everything:
				return usagef("pass either filter flags or --all, not both")
			case !all && everything:
				return usagef("nothing narrows the removal: pass --principal, --topic, --group, --cluster, --transactional-id, --mirror, --resource-type, --operation, --permission or --host; to remove every binding pass --all --yes")
			case all && !yes && !dryRun:
				return usagef("--all removes every ACL binding of the cluster: pass --yes as well to confirm (--dry-run lists them)")
			}
			var removed []acl.Binding
			var errs []error
			if dryRun {
				if removed, err = a.describeACLs(cmd, f); err != nil {
					return err
				}
			} else {
				client, err := a.admin()
				if err != nil {
					return err
				}
				ctx, cancel := a.rpcCtx(cmd.Context())
				defer cancel()
				resp, err := client.DeleteAcls(ctx, &twinlogv1.DeleteAclsRequest{Filters: []*twinlogv1.AclFilter{aclFilterToProto(f)}})
				if err != nil {
					return rpcError(err, a.bootstrap, "delete acls")
				}
				if len(resp.GetResults()) == 0 {
					return fmt.Errorf("delete acls: %s answered no result for the filter; check with `twinctl acls list`", a.bootstrap)
				}
				r := resp.GetResults()[0]
				errs = append(errs, protoErr(r.GetError(), filterSubject(f), r.GetErrorMessage(), ""))
				for _, b := range r.GetDeleted() {
					removed = append(removed, aclFromProto(b))
				}
			}
			views := make([]aclView, len(removed))
			rows := make([]aclRemoveRow, len(removed))
			for i, b := range removed {
				views[i] = aclViewOf(b)
				rows[i] = aclRemoveRow{aclView: views[i], Removed: !dryRun, DryRun: dryRun}
			}
			result := func(int) string {
				if dryRun {
					return "dry run"
				}
				return "removed"
			}
			err = errors.Join(errs...)
			if len(removed) == 0 && err != nil {
				return err // an empty table would only hide the error
			}
			if err := renderACLRows(a.printer(), views, rows, result); err != nil {
				return err
			}
			if err != nil {
				return err
			}
			if len(removed) == 0 {
				fmt.Fprintf(a.opts.Stderr, "twinctl: warning: no ACL binding matches %s: nothing removed\n", filterTerms(f))
			}
			return nil
		},
	}
	ff.add(c, "whose bindings to remove")
	c.Flags().BoolVar(&all, "all", false, "remove every binding (needs --yes)")
	c.Flags().BoolVar(&yes, "yes", false, "confirm --all")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list the bindings that would be removed and remove nothing")
	return c
}
