package principal

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func mustParse(t *testing.T, s string) Rules {
	t.Helper()
	r, err := ParseRules(s)
	if err != nil {
		t.Fatalf("ParseRules(%q): %v", s, err)
	}
	return r
}

// TestKafkaExamples runs the examples of Kafka's documentation of
// ssl.principal.mapping.rules and of its SslPrincipalMapper tests.
func TestKafkaExamples(t *testing.T) {
	for _, tc := range []struct {
		rules, dn, want string
	}{
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,`,
			"CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`,
			"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U`,
			"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "ADMINUSER@ADMIN"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT`,
			"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
			"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"},
		{"", "CN=alice,OU=eng,O=acme,C=US", "CN=alice,OU=eng,O=acme,C=US"},
		{"DEFAULT", "CN=alice", "CN=alice"},
		// A comma and spaces escaped inside the CN (Kafka's
		// testCommaWithWhitespace).
		{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`},
	} {
		r := mustParse(t, tc.rules)
		got, err := r.Apply(tc.dn)
		if err != nil || got != tc.want {
			t.Errorf("rules %q, DN %q: got %q, %v; want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}

	// Kafka's testSslPrincipalMapper: several rules, the first that
	// applies wins.
	r := mustParse(t, strings.Join([]string{
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`,
		`RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U`,
		`DEFAULT`,
	}, ", "))
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := r.Apply(dn); err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", dn, got, err, want)
		}
	}
}

func TestNoMatchingRule(t *testing.T) {
	r := mustParse(t, `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`)
	_, err := r.Apply("CN=alice,OU=eng")
	if !errors.Is(err, ErrNoMatchingRule) || !strings.Contains(err.Error(), "CN=alice,OU=eng") {
		t.Errorf("error %v, want ErrNoMatchingRule naming the DN", err)
	}
	// The pattern must match the whole DN, not a part of it.
	r = mustParse(t, `RULE:CN=alice/x/`)
	if _, err := r.Apply("CN=alice,O=acme"); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("a partial match applied: %v", err)
	}
	if got, err := r.Apply("CN=alice"); err != nil || got != "x" {
		t.Errorf("full match: %q, %v", got, err)
	}
	// An alternative that matches a prefix does not hide one that
	// matches the whole DN.
	if got, err := mustParse(t, `RULE:(a)|(ab)/[$1$2]/`).Apply("ab"); err != nil || got != "[ab]" {
		t.Errorf("alternation: %q, %v", got, err)
	}
}

func TestValidRules(t *testing.T) {
	// Kafka's testValidRules and testRulesSplitting: the rules each
	// string holds, in String's canonical form.
	for in, want := range map[string]string{
		"DEFAULT":                               "DEFAULT",
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`: `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`:                  `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/`: `RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`:                         `RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`,
		`RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U`:                   `RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U`,
		`RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/`:                              `RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/`,
		`RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/`:                              `RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/`,
		"RULE://":                                                          "RULE://",
		"RULE:/.*/":                                                        "RULE:/.*/",
		"RULE:/.*/L":                                                       "RULE:/.*/L",
		"RULE://,DEFAULT":                                                  "RULE://,DEFAULT",
		"  RULE:// ,  DEFAULT  ":                                           "RULE://,DEFAULT",
		"  RULE:   /     / ,  DEFAULT  ":                                   "RULE:   /     /,DEFAULT",
		"  RULE:  /     /U   ,DEFAULT  ":                                   "RULE:  /     /U,DEFAULT",
		"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ":           "RULE:([A-Z]*)/$1/U,RULE:([a-z]+)/$1/,DEFAULT",
		",,RULE://,,,DEFAULT,,":                                            "RULE://,DEFAULT",
		",  , RULE: /   /    ,,,   DEFAULT, ,   ":                          "RULE: /   /,DEFAULT",
		"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,":                       "RULE:   /  /U,DEFAULT",
		"\tRULE:a/b/\n,\r\nDEFAULT\f":                                      "RULE:a/b/,DEFAULT",
		`RULE:\/\\\(\)\n\t/\/\//`:                                          `RULE:\/\\\(\)\n\t/\/\//`,
		`RULE:\**\/+/*/L,RULE:\/*\**/**/`:                                  `RULE:\**\/+/*/L,RULE:\/*\**/**/`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`: `RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
	} {
		r, err := ParseRules(in)
		if err != nil {
			t.Errorf("ParseRules(%q): %v", in, err)
			continue
		}
		if got := r.String(); got != want {
			t.Errorf("ParseRules(%q) = %q, want %q", in, got, want)
		}
	}
	// "Rules rule": five rules whose patterns hold commas and the words
	// RULE: and DEFAULT.
	r := mustParse(t, `RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`)
	if len(r.rules) != 5 {
		t.Errorf("%d rules, want 5", len(r.rules))
	}
	if got, err := r.Apply(",RULE:,"); err != nil || got != ",RULE:,/" {
		t.Errorf("escaped slash in a replacement: %q, %v", got, err)
	}
	if got, err := r.Apply(", DEFAULT, "); err != nil || got != "DEFAULT" {
		t.Errorf("pattern holding DEFAULT: %q, %v", got, err)
	}
	// An escaped slash in a pattern is a slash.
	if got, err := mustParse(t, `RULE:^CN=a\/b$/ok/`).Apply("CN=a/b"); err != nil || got != "ok" {
		t.Errorf("escaped slash in a pattern: %q, %v", got, err)
	}
	if s := (Rules{}).String(); s != "DEFAULT" {
		t.Errorf("zero Rules: %q", s)
	}
	if got, err := (Rules{}).Apply("CN=x"); err != nil || got != "CN=x" {
		t.Errorf("zero Rules apply: %q, %v", got, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		offset int
		msg    string
	}{
		// Kafka's testInvalidRules.
		{"default", 0, "want RULE: or DEFAULT"},
		{"DEFAUL", 0, "want RULE: or DEFAULT"},
		{"DEFAULT/L", 7, `unexpected "/"`},
		{"DEFAULT/U", 7, `unexpected "/"`},
		{`RULE:CN=(.*?),OU=ServiceUsers.*/$1`, 0, "no '/' ending its replacement"},
		{`rule:^CN=(.*?),OU=ServiceUsers.*$/$1/`, 0, "want RULE: or DEFAULT"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U`, 38, `unexpected "/"`},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/L`, 0, "no '/' ending its replacement"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/U`, 0, "no '/' ending its replacement"},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/LU`, 0, "no '/' ending its replacement"},
		// Others.
		{"RULE:abc", 0, "no '/' ending its pattern"},
		{`RULE:abc\/`, 0, "no '/' ending its pattern"},
		{`RULE:a/b\`, 0, "no '/' ending its replacement"},
		{"RULE:a/b/X", 9, `unexpected "X"`},
		{"RULE:a/b/ L", 10, `unexpected "L"`},
		{"DEFAULT DEFAULT", 8, `unexpected "D"`},
		{"DEFAULT, RULE:(/x/", 14, "bad pattern"},
		{"RULE:a(?=b)/x/", 5, "bad pattern"},     // lookahead: Java only
		{"RULE:a++/x/", 5, "bad pattern"},        // possessive: Java only
		{`RULE:(a)\1/x/`, 5, "bad pattern"},      // backreference
		{`RULE:\Qa/x/`, 5, "cannot be anchored"}, // \Q to the end would swallow the anchor
		{"RULE:(a)/x$/", 10, "a '$' ends"},
		{"RULE:(a)/$x/", 9, "not followed by a group"},
		{"RULE:(a)/${b}/", 9, `no group named "b"`},
		{"RULE:(a)/${a/", 9, "without a closing"},
		{`RULE:(a)/x\/`, 0, "no '/' ending its replacement"},
		{"RULE:a/$1/", 7, "has none"},
		{",,, ,", 0, "no rules"},
	} {
		_, err := ParseRules(tc.in)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseRules(%q): error %v, want a ParseError", tc.in, err)
			continue
		}
		if pe.Offset != tc.offset || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("ParseRules(%q): offset %d %q, want offset %d and %q", tc.in, pe.Offset, pe.Msg, tc.offset, tc.msg)
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("error text %q does not give the offset", err)
		}
	}
}

func TestReplacement(t *testing.T) {
	const dn = "CN=alice,OU=eng,O=acme"
	for _, tc := range []struct {
		rule, want string
	}{
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1/`, "alice"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$3:$2:$1/`, "acme:eng:alice"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$0/`, dn},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/\$1/`, "$1"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/a\\b/`, `a\b`},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/\x\y/`, "xy"},
		// Kafka keeps references to groups that do not exist literally,
		// after Java's greedy reading of the digits.
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$4/`, "$4"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$45x/`, "$45x"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$12/`, "alice2"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2.$3/U`, "ALICE@ENG.ACME"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1$2/`, "aliceeng"},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$01/`, "alice"},
		{`RULE:^CN=(?P<user>.*?),OU=(?<unit>.*?),.*$/${unit}-${user}/`, "eng-alice"},
		// A group that took no part in the match is empty.
		{`RULE:^CN=(.*?),(x)?OU=.*$/[$1|$2]/`, "[alice|]"},
		// Unanchored: the full match is used once (Kafka's replaceAll
		// would interleave the replacement with the DN).
		{`RULE:(.*?)/[$1]/`, "[" + dn + "]"},
		{`RULE:CN=(\w+),.*/$1/L`, "alice"},
	} {
		got, err := mustParse(t, tc.rule).Apply(dn)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.rule, got, err, tc.want)
		}
	}
	// Twelve groups: $12 is the twelfth.
	r := mustParse(t, `RULE:^(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)$/$12$11$1/`)
	if got, err := r.Apply("abcdefghijkl"); err != nil || got != "lka" {
		t.Errorf("$12: %q, %v", got, err)
	}
	// Case flags on non-ASCII text.
	if got, _ := mustParse(t, `RULE:^CN=(.*)$/$1/L`).Apply("CN=ÄLICE"); got != "älice" {
		t.Errorf("L: %q", got)
	}
	if got, _ := mustParse(t, `RULE:^CN=(.*)$/$1/U`).Apply("CN=jürgen"); got != "JÜRGEN" {
		t.Errorf("U: %q", got)
	}
}

// TestRoundTrip checks with generated rules that ParseRules reads what
// String writes, and reads the rules whatever the spacing and empty
// entries between them.
func TestRoundTrip(t *testing.T) {
	patterns := []string{`^CN=(.*?),OU=(.*?)$`, `(a|b)*`, `[^,\/]+`, `a\/b`, ``, ` `, `\\`, `,`, `^CN=([^,DEFAULT,]+)(,.*|$)`, `x{1,3}`, `\Qa,b\E`}
	noGroupReplacements := []string{``, `\/`, `\$1`, `a,b`, `$0@x`, ` `, `DEFAULT`, `RULE:`}
	replacements := append([]string{`$1`, `$1@$1`}, noGroupReplacements...)
	space := rapid.SampledFrom([]string{"", " ", "\t", "  ", "\n"})
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "n")
		var canon, spaced []string
		for i := range n {
			var r string
			if rapid.IntRange(0, 4).Draw(t, "kind") == 0 {
				r = "DEFAULT"
			} else {
				pat := rapid.SampledFrom(patterns).Draw(t, "pattern")
				reps := replacements
				if regexp.MustCompile(pat).NumSubexp() == 0 {
					reps = noGroupReplacements
				}
				r = "RULE:" + pat + "/" +
					rapid.SampledFrom(reps).Draw(t, "replacement") + "/" +
					rapid.SampledFrom([]string{"", "L", "U"}).Draw(t, "flag")
			}
			canon = append(canon, r)
			sep := ""
			if i > 0 {
				sep = space.Draw(t, "s1") + "," + space.Draw(t, "s2")
				if rapid.Bool().Draw(t, "empty") {
					sep += "," + space.Draw(t, "s3")
				}
			}
			spaced = append(spaced, sep+r)
		}
		in := space.Draw(t, "lead") + strings.Join(spaced, "") + space.Draw(t, "trail")
		r, err := ParseRules(in)
		if err != nil {
			t.Fatalf("ParseRules(%q): %v", in, err)
		}
		want := strings.Join(canon, ",")
		if got := r.String(); got != want {
			t.Fatalf("ParseRules(%q).String() = %q, want %q", in, got, want)
		}
		again, err := ParseRules(r.String())
		if err != nil || again.String() != want {
			t.Fatalf("reparse of %q: %v", want, err)
		}
	})
}

func FuzzParseRules(f *testing.F) {
	for _, s := range []string{
		"", "DEFAULT", `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
		`RULE:(?P<a>x)/${a}$1\$/`, `RULE:\Q/x/`, "RULE:a/b/X", ",,,", `RULE:(a)/$99/`,
	} {
		f.Add(s, "CN=alice,OU=eng,O=acme")
	}
	f.Fuzz(func(t *testing.T, s, dn string) {
		r, err := ParseRules(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(s) {
				t.Fatalf("ParseRules(%q): bad error %v", s, err)
			}
			_ = err.Error()
			return
		}
		again, err := ParseRules(r.String())
		if err != nil {
			t.Fatalf("ParseRules(%q) gave %q, which does not parse: %v", s, r.String(), err)
		}
		if again.String() != r.String() {
			t.Fatalf("String not stable: %q then %q", r.String(), again.String())
		}
		name, err := r.Apply(dn)
		name2, err2 := again.Apply(dn)
		if name != name2 || (err == nil) != (err2 == nil) {
			t.Fatalf("reparsed rules map %q differently: %q/%v vs %q/%v", dn, name, err, name2, err2)
		}
	})
}

// TestDocExample checks the example of the package documentation.
func TestDocExample(t *testing.T) {
	r := mustParse(t, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n"+
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\n"+
		"DEFAULT")
	for dn, want := range map[string]string{
		"CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown": "serviceuser",
		"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown":          "adminuser@admin",
		"CN=bob,O=acme": "CN=bob,O=acme",
	} {
		if got, err := r.Apply(dn); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", dn, got, err, want)
		}
	}
}
