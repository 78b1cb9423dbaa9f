package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// source supplies the non-default settings: the config file's values and
// the environment. Flags come from the pflag.FlagSet.
type source struct {
	file   map[string]value                 // key → value from the YAML file
	getenv func(name string) (string, bool) // os.LookupEnv in the daemons
}

// load resolves every field with the precedence of doc.go (flag > env >
// file > default) and parses it. Every bad key is reported, each naming the
// key, the value as written, the rule and where the value came from.
func load(file string, fs *pflag.FlagSet, fields []field) error {
	var data []byte
	if file != "" {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			return fmt.Errorf("config: read %s: %w", file, err)
		}
	}
	return loadBytes(file, data, os.LookupEnv, fs, fields)
}

// loadBytes is load with the file's contents (name "" and no data: no
// file) and the environment given.
func loadBytes(name string, data []byte, getenv func(string) (string, bool), fs *pflag.FlagSet, fields []field) error {
	src := source{getenv: getenv}
	if name != "" {
		var err error
		if src.file, err = parseYAML(name, data, fields); err != nil {
			return err
		}
	}
	return resolve(src, fs, fields)
}

func resolve(src source, fs *pflag.FlagSet, fields []field) error {
	var errs []error
	for _, f := range fields {
		v := value{text: f.def, source: "default"}
		if fv, ok := src.file[f.key]; ok {
			v = fv
		}
		// An empty variable counts as unset, as it did with viper.
		if s, ok := src.getenv(EnvName(f.key)); ok && s != "" {
			v = value{text: s, source: "env " + EnvName(f.key)}
		}
		if fs != nil {
			if fl := fs.Lookup(f.key); fl != nil && fl.Changed {
				v = value{text: fl.Value.String(), source: "flag --" + f.key}
			}
		}
		if err := f.set(v); err != nil {
			errs = append(errs, fmt.Errorf("config: %s = %v: %w (from %s)", f.key, v, err, v.source))
		}
	}
	return errors.Join(errs...)
}

// parseYAML reads a config file: one mapping of flat Kafka-named keys to a
// scalar or a sequence of scalars. It works on yaml.Node so that every
// scalar keeps the text the operator wrote: the field parsers then apply one
// rule to file, env and flag values alike, instead of taking a YAML
// resolver's int (where `010` is 8 and `0x10` is 16) or float (`1.9`).
// Keys are matched case-insensitively (as viper did); an unknown or
// repeated key, a nested mapping or a non-scalar list item is an error
// naming the file and line.
func parseYAML(name string, data []byte, fields []field) (_ map[string]value, err error) {
	defer func() {
		// The YAML library is third-party code reading operator input: if
		// it panics, the daemon reports a bad file instead of a trace.
		if r := recover(); r != nil {
			err = fmt.Errorf("config: read %s: malformed YAML (%v)", name, r)
		}
	}()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config: read %s: %w", name, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	root = deref(root)
	switch {
	case root == nil || root.Kind == 0 || (root.Kind == yaml.ScalarNode && root.Tag == "!!null"):
		return nil, nil // empty file, or only comments
	case root.Kind != yaml.MappingNode:
		return nil, fmt.Errorf("config: %s:%d: want a mapping of key: value lines at the top level", name, root.Line)
	}
	known := map[string]bool{}
	for _, f := range fields {
		known[f.key] = true
	}
	out := map[string]value{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := deref(root.Content[i]), deref(root.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config: %s:%d: a key must be a plain name", name, root.Content[i].Line)
		}
		key := strings.ToLower(strings.TrimSpace(k.Value))
		if !known[key] {
			return nil, fmt.Errorf("config: %s:%d: unknown key %q (known keys: see --help)", name, k.Line, k.Value)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("config: %s:%d: key %q is set twice", name, k.Line, key)
		}
		val, err := nodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("config: %s:%d: %s: %w", name, k.Line, key, err)
		}
		val.source = fmt.Sprintf("file %s:%d", name, k.Line)
		out[key] = val
	}
	return out, nil
}

// deref follows an alias to its anchored node (one step: an anchor names
// a node, never another alias).
func deref(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		return n.Alias
	}
	return n
}

func nodeValue(n *yaml.Node) (value, error) {
	switch {
	case n == nil:
		return value{null: true}, nil
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return value{null: true}, nil
	case n.Kind == yaml.ScalarNode:
		return value{text: n.Value}, nil
	case n.Kind == yaml.SequenceNode:
		v := value{isList: true}
		for _, it := range n.Content {
			it = deref(it)
			if it == nil || it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return value{}, errors.New("a list may hold only plain values")
			}
			v.items = append(v.items, it.Value)
		}
		return v, nil
	}
	return value{}, errors.New("want a value or a list of values, not a mapping (keys are flat: log.dirs, not log: {dirs: ...})")
}

// unknownEnv returns, sorted, the TWINLOG_* names in environ ("NAME=value"
// entries, as os.Environ) that no field reads. They are likely typos or keys
// of the other daemon; the daemons warn about them and go on.
func unknownEnv(environ []string, fields []field) []string {
	known := map[string]bool{}
	for _, f := range fields {
		known[EnvName(f.key)] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix+"_") && !known[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// UnknownBrokerEnv returns the TWINLOG_* variables in environ that name no
// brokerd key (brokerd logs a warning naming them).
func UnknownBrokerEnv(environ []string) []string {
	return unknownEnv(environ, brokerFields(&BrokerConfig{}))
}

// UnknownControllerEnv returns the TWINLOG_* variables in environ that name
// no controllerd key.
func UnknownControllerEnv(environ []string) []string {
	return unknownEnv(environ, controllerFields(&ControllerConfig{}))
}
