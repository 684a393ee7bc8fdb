package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

// configFlag names the agent's YAML config file. Its keys are the agent's
// flag names, derived from the command's flag list, so a flag added later
// has a key without more code. A flag given on the command line (or by its
// environment variable) wins over the file.
const configFlagName = "config"

func configFlag() ucli.Flag {
	return &ucli.StringFlag{Name: configFlagName, Usage: "YAML file of agent settings: each key is a flag name (without --); flags given on the command line win"}
}

// applyConfigFile sets, from the file named by --config, every flag of c's
// command that the command line left unset. Unknown keys and values of the
// wrong type are errors naming the key and its line; nothing is applied
// unless the whole file is valid.
func applyConfigFile(c *ucli.Context) error {
	path := c.String(configFlagName)
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	values, err := parseConfig(data, c.Command.Flags)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	for _, v := range values {
		if c.IsSet(v.flag) {
			continue
		}
		for _, s := range v.values {
			if err := c.Set(v.flag, s); err != nil {
				return fmt.Errorf("--config %s: line %d: %s: %v", path, v.line, v.flag, err)
			}
		}
	}
	return nil
}

// configValue is one key of the file, as the flag's string value(s).
type configValue struct {
	flag   string
	line   int
	values []string // one per occurrence: a list key sets a repeatable flag once per item
}

// parseConfig checks the file against flags and returns its values in file
// order.
func parseConfig(data []byte, flags []ucli.Flag) ([]configValue, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file sets nothing
		}
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of flag names to values", root.Line)
	}
	byName := map[string]ucli.Flag{}
	for _, f := range flags {
		if len(f.Names()) == 0 || f.Names()[0] == configFlagName || f.Names()[0] == "help" {
			continue
		}
		// An old name kept as an alias (supervisor-nice) still works as a key.
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	var out []configValue
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		f, ok := byName[k.Value]
		if !ok {
			return nil, fmt.Errorf("line %d: unknown key %q (keys are the agent's flag names; see foreman agent --help)", k.Line, k.Value)
		}
		name := f.Names()[0] // flag values live under the first name once parsed
		if prev, dup := seen[name]; dup {
			return nil, fmt.Errorf("line %d: key %q given twice (first on line %d)", k.Line, k.Value, prev)
		}
		seen[name] = k.Line
		values, err := configValues(f, v)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err)
		}
		out = append(out, configValue{flag: name, line: k.Line, values: values})
	}
	return out, nil
}

// configValues converts a YAML value to the string(s) flag.Set takes,
// checking its type against the flag's.
func configValues(f ucli.Flag, v *yaml.Node) ([]string, error) {
	if _, list := f.(*ucli.StringSliceFlag); list {
		if v.Kind == yaml.ScalarNode {
			return []string{v.Value}, nil
		}
		if v.Kind != yaml.SequenceNode {
			return nil, errors.New("want a list of strings")
		}
		out := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return nil, errors.New("want a list of strings")
			}
			out = append(out, item.Value)
		}
		return out, nil
	}
	if v.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("want %s", configType(f))
	}
	switch f.(type) {
	case *ucli.BoolFlag:
		var b bool
		if v.Decode(&b) != nil {
			return nil, fmt.Errorf("want a boolean (true or false), got %q", v.Value)
		}
		return []string{strconv.FormatBool(b)}, nil
	case *ucli.IntFlag:
		var n int
		if v.Decode(&n) != nil {
			return nil, fmt.Errorf("want an integer, got %q", v.Value)
		}
		return []string{strconv.Itoa(n)}, nil
	case *ucli.DurationFlag:
		if _, err := time.ParseDuration(v.Value); err != nil {
			return nil, fmt.Errorf("want a duration (e.g. 30s, 5m, 168h), got %q", v.Value)
		}
		return []string{v.Value}, nil
	case *ucli.StringFlag:
		return []string{v.Value}, nil // any scalar: cpu: 4 means "4"
	}
	return nil, fmt.Errorf("flag type %T has no config file form", f)
}

// configType names the YAML type a flag takes, for messages and docs.
func configType(f ucli.Flag) string {
	switch f.(type) {
	case *ucli.BoolFlag:
		return "a boolean"
	case *ucli.IntFlag:
		return "an integer"
	case *ucli.DurationFlag:
		return "a duration"
	case *ucli.StringSliceFlag:
		return "a list of strings"
	case *ucli.StringFlag:
		return "a string"
	}
	return fmt.Sprintf("(unsupported %T)", f)
}
