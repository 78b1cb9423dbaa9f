package principal

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrNoMatchingRule is the error Apply wraps when no rule maps a DN; as in
// Kafka, the peer then fails to authenticate.
var ErrNoMatchingRule = errors.New("principal: no mapping rule matches")

// Rules is a parsed list of mapping rules, Kafka's
// ssl.principal.mapping.rules. The zero value is DEFAULT alone. A Rules is
// immutable and safe for concurrent use.
type Rules struct {
	rules []rule
}

type rule struct {
	isDefault   bool
	pattern     string         // as written, escapes included
	replacement string         // as written, escapes included
	re          *regexp.Regexp // pattern anchored at both ends
	template    string         // replacement for regexp.Expand
	lower       bool
	upper       bool
}

// ParseError is a syntax error in a rules string.
type ParseError struct {
	Rules  string // the whole string parsed
	Offset int    // byte offset in Rules of the offending text
	Msg    string
}

func (e *ParseError) Error() string {
	near := e.Rules[min(max(e.Offset, 0), len(e.Rules)):]
	if len(near) > 24 {
		near = near[:24] + "..."
	}
	return fmt.Sprintf("principal: mapping rules: %s at offset %d (near %q)", e.Msg, e.Offset, near)
}

// ParseRules parses a comma-separated list of rules, each "DEFAULT" or
// "RULE:pattern/replacement/" optionally followed by the flag L or U.
// Whitespace around rules and commas is ignored, and so are empty entries
// (",,"). A string that is empty or all whitespace is DEFAULT alone; one
// that holds only empty entries is an error, since it would refuse every
// peer.
//
// Inside pattern and replacement a backslash escapes the next character,
// so "\/" is a slash that does not end the part, and commas need no
// escape: "RULE:^CN=([^,]+),.*$/$1/" is one rule. The escapes stay in the
// text: the pattern is a regular expression (in which "\/" is a slash) and
// the replacement a Java replacement string (in which "\x" is x).
//
// The pattern is compiled with Go's regexp package (RE2 syntax), which
// shares Java's syntax for the constructs mapping rules use (groups,
// classes, lazy quantifiers, anchors) but has no lookaround, possessive
// quantifiers or backreferences; a pattern using them is refused here
// rather than at authentication. The replacement is checked too: "$n"
// and "${name}" refer to groups, "\$" is a dollar sign, and "$" before
// anything else is an error, as in Java. Following Kafka, "$n" whose
// number names no group (after dropping trailing digits, as Java reads
// "$12" as group 1 followed by "2" when there is no group 12) is kept as
// the literal text "$n"; in a pattern without groups Kafka fails at
// authentication instead, and ParseRules refuses the rule.
func ParseRules(s string) (Rules, error) {
	if strings.TrimFunc(s, isSpace) == "" {
		return Rules{rules: []rule{{isDefault: true}}}, nil
	}
	p := &parser{s: s}
	var rules []rule
	for {
		p.skipSpace()
		if p.i == len(s) {
			break
		}
		if s[p.i] == ',' { // an empty entry
			p.i++
			continue
		}
		r, err := p.rule()
		if err != nil {
			return Rules{}, err
		}
		rules = append(rules, r)
		p.skipSpace()
		if p.i == len(s) {
			break
		}
		if s[p.i] != ',' {
			return Rules{}, p.errorf(p.i, "unexpected %q after a rule (want ',' or the end)", s[p.i:p.i+1])
		}
		p.i++
	}
	if len(rules) == 0 {
		return Rules{}, p.errorf(0, "no rules, only empty entries")
	}
	return Rules{rules: rules}, nil
}

// Apply maps a distinguished name to a principal name with the first rule
// that applies: DEFAULT applies to every DN and yields it unchanged; a RULE
// applies when its pattern matches the whole DN (Java's Matcher.matches),
// and yields its replacement with the groups of that match substituted,
// then lower-cased with L or upper-cased with U. When no rule applies the
// error wraps ErrNoMatchingRule.
//
// Kafka substitutes with Java's String.replaceAll on the DN, which finds
// the pattern anew, possibly several times; for a pattern anchored with ^
// and $, the documented form, that is the one full match used here. A
// pattern that can also match a part of the DN (an unanchored lazy or
// empty-matching pattern such as "(.*?)") yields the replacement once
// here, where Kafka repeats it for every match. Case mapping is Go's
// simple Unicode mapping; Java's full mapping differs for a few letters
// (ß upper-cases to "SS" there, final Σ lower-cases to ς).
func (r Rules) Apply(dn string) (string, error) {
	if len(r.rules) == 0 {
		return dn, nil
	}
	for i := range r.rules {
		ru := &r.rules[i]
		if ru.isDefault {
			return dn, nil
		}
		m := ru.re.FindStringSubmatchIndex(dn)
		if m == nil {
			continue
		}
		name := string(ru.re.ExpandString(nil, ru.template, dn, m))
		switch {
		case ru.lower:
			name = strings.ToLower(name)
		case ru.upper:
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w %q (rules %s)", ErrNoMatchingRule, dn, r)
}

// String returns the rules in the syntax ParseRules reads, comma-separated,
// without spaces; parsing it gives the same rules.
func (r Rules) String() string {
	if len(r.rules) == 0 {
		return "DEFAULT"
	}
	var b strings.Builder
	for i, ru := range r.rules {
		if i > 0 {
			b.WriteByte(',')
		}
		if ru.isDefault {
			b.WriteString("DEFAULT")
			continue
		}
		b.WriteString("RULE:")
		b.WriteString(ru.pattern)
		b.WriteByte('/')
		b.WriteString(ru.replacement)
		b.WriteByte('/')
		switch {
		case ru.lower:
			b.WriteByte('L')
		case ru.upper:
			b.WriteByte('U')
		}
	}
	return b.String()
}

type parser struct {
	s string
	i int
}

func (p *parser) errorf(at int, format string, args ...any) *ParseError {
	return &ParseError{Rules: p.s, Offset: at, Msg: fmt.Sprintf(format, args...)}
}

// isSpace is Java's \s: space, tab, newline, vertical tab, form feed and
// carriage return.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) && isSpace(rune(p.s[p.i])) {
		p.i++
	}
}

// rule parses one rule at p.i.
func (p *parser) rule() (rule, error) {
	start := p.i
	rest := p.s[p.i:]
	switch {
	case strings.HasPrefix(rest, "DEFAULT"):
		p.i += len("DEFAULT")
		return rule{isDefault: true}, nil
	case strings.HasPrefix(rest, "RULE:"):
	default:
		return rule{}, p.errorf(start, "want RULE: or DEFAULT (both upper case)")
	}
	p.i += len("RULE:")
	patAt := p.i
	pattern, ok := p.part()
	if !ok {
		return rule{}, p.errorf(start, "rule has no '/' ending its pattern (RULE:pattern/replacement/[LU])")
	}
	repAt := p.i
	replacement, ok := p.part()
	if !ok {
		return rule{}, p.errorf(start, "rule has no '/' ending its replacement (RULE:pattern/replacement/[LU])")
	}
	r := rule{pattern: pattern, replacement: replacement}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case 'L':
			r.lower = true
			p.i++
		case 'U':
			r.upper = true
			p.i++
		}
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return rule{}, p.errorf(patAt, "bad pattern: %v", err)
	}
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil { // a pattern ending inside \Q...
		return rule{}, p.errorf(patAt, "pattern cannot be anchored: %v", err)
	}
	r.re = re
	tmpl, off, msg := javaTemplate(replacement, re)
	if msg != "" {
		return rule{}, p.errorf(repAt+off, "bad replacement: %s", msg)
	}
	r.template = tmpl
	return r, nil
}

// part scans a pattern or replacement from p.i up to an unescaped '/',
// which it consumes. It reports false if there is none.
func (p *parser) part() (string, bool) {
	start := p.i
	for i := p.i; i < len(p.s); i++ {
		switch p.s[i] {
		case '\\':
			i++ // the escaped byte, even a '/'; a trailing '\' finds no '/'
		case '/':
			p.i = i + 1
			return p.s[start:i], true
		}
	}
	return "", false
}

// javaTemplate converts a Java replacement string for re into a template
// for regexp.Expand. On error it returns the byte offset in rep and a
// message.
func javaTemplate(rep string, re *regexp.Regexp) (tmpl string, off int, msg string) {
	groups := re.NumSubexp()
	var b strings.Builder
	for i := 0; i < len(rep); {
		c := rep[i]
		switch {
		case c == '\\':
			if i+1 == len(rep) {
				return "", i, "a '\\' ends the replacement with nothing to escape"
			}
			// The escaped character is literal: copy its whole UTF-8
			// sequence, doubling a '$'.
			j := i + 1
			for j++; j < len(rep) && rep[j]&0xC0 == 0x80; j++ {
			}
			writeLiteral(&b, rep[i+1:j])
			i = j
		case c == '$':
			if i+1 == len(rep) {
				return "", i, "a '$' ends the replacement (write \\$ for a dollar sign)"
			}
			d := rep[i+1]
			switch {
			case d == '{':
				end := strings.IndexByte(rep[i+2:], '}')
				if end < 0 {
					return "", i, "'${' without a closing '}'"
				}
				name := rep[i+2 : i+2+end]
				if !validGroupName(name) || re.SubexpIndex(name) < 0 {
					return "", i, fmt.Sprintf("the pattern has no group named %q", name)
				}
				b.WriteString("${" + name + "}")
				i += 3 + end
			case d >= '0' && d <= '9':
				n := int(d - '0')
				if n > groups {
					if groups == 0 {
						return "", i, fmt.Sprintf("$%d refers to a group, and the pattern has none", n)
					}
					// Kafka keeps a reference to no group as literal text.
					b.WriteString("$$")
					i++
					continue
				}
				j := i + 2
				for ; j < len(rep) && rep[j] >= '0' && rep[j] <= '9'; j++ {
					next := n*10 + int(rep[j]-'0')
					if next > groups {
						break
					}
					n = next
				}
				b.WriteString("${" + strconv.Itoa(n) + "}")
				i = j
			default:
				return "", i, "a '$' not followed by a group number or {name} (write \\$ for a dollar sign)"
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), 0, ""
}

func writeLiteral(b *strings.Builder, s string) {
	b.WriteString(strings.ReplaceAll(s, "$", "$$"))
}

// validGroupName reports whether name is a group name both Java (a letter,
// then letters and digits) and regexp.Expand (letters, digits, '_') read
// in "${name}".
func validGroupName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
