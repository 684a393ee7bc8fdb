package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"
)

// applyArgs runs `foreman agent ARGS` with an Action that only applies the
// config file, and returns the resulting flag values by name.
func applyArgs(t *testing.T, args ...string) (map[string]any, error) {
	t.Helper()
	cmd := Command("test")
	got := map[string]any{}
	cmd.Action = func(c *ucli.Context) error {
		if err := applyConfigFile(c); err != nil {
			return err
		}
		for _, f := range c.Command.Flags {
			n := f.Names()[0]
			switch f.(type) {
			case *ucli.StringSliceFlag:
				got[n] = c.StringSlice(n)
			default:
				got[n] = c.Value(n)
			}
		}
		return nil
	}
	app := &ucli.App{Name: "foreman", Commands: []*ucli.Command{cmd}, ExitErrHandler: func(*ucli.Context, error) {}}
	err := app.Run(append([]string{"foreman", "agent"}, args...))
	return got, err
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every agent flag has a key: a file setting each flag to a value of its
// type is accepted and arrives as that flag's value. A flag added later of a
// type the file cannot express fails here.
func TestConfigFileEveryFlagHasKey(t *testing.T) {
	var body strings.Builder
	want := map[string]any{}
	for _, f := range Command("test").Flags {
		n := f.Names()[0]
		if n == configFlagName {
			continue
		}
		switch f.(type) {
		case *ucli.BoolFlag:
			body.WriteString(n + ": true\n")
			want[n] = true
		case *ucli.IntFlag:
			body.WriteString(n + ": 5\n")
			want[n] = 5
		case *ucli.DurationFlag:
			body.WriteString(n + ": 90s\n")
			want[n] = 90 * time.Second
		case *ucli.StringSliceFlag:
			body.WriteString(n + ": [a=1, b=2]\n")
			want[n] = []string{"a=1", "b=2"}
		case *ucli.StringFlag:
			body.WriteString(n + ": some-" + n + "\n")
			want[n] = "some-" + n
		default:
			t.Errorf("agent flag --%s (%T) has no config file form: add it to configValues", n, f)
		}
	}
	got, err := applyArgs(t, "--config", writeConfig(t, body.String()))
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range want {
		if !reflect.DeepEqual(got[n], w) {
			t.Errorf("key %s: flag value %#v, want %#v", n, got[n], w)
		}
	}
}

func TestConfigFileFlagsWin(t *testing.T) {
	p := writeConfig(t, "name: from-file\nport: 8000\njoin: [a, b]\nlog-level: debug\n")
	got, err := applyArgs(t, "--config", p, "--name", "from-flag", "--join", "c")
	if err != nil {
		t.Fatal(err)
	}
	if got["name"] != "from-flag" || got["port"] != 8000 || got["log-level"] != "debug" {
		t.Errorf("name=%v port=%v log-level=%v, want from-flag 8000 debug", got["name"], got["port"], got["log-level"])
	}
	if !reflect.DeepEqual(got["join"], []string{"c"}) {
		t.Errorf("join = %v, want the command line's [c] only", got["join"])
	}
}

// A renamed flag's old name works on the command line and in the file.
func TestFlagOldNames(t *testing.T) {
	got, err := applyArgs(t, "--supervisor-nice", "3")
	if err != nil {
		t.Fatal(err)
	}
	if got["job-nice"] != 3 {
		t.Errorf("--supervisor-nice 3: job-nice = %v, want 3", got["job-nice"])
	}
	got, err = applyArgs(t, "--config", writeConfig(t, "supervisor-nice: 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got["job-nice"] != 4 {
		t.Errorf("supervisor-nice: 4 in the file: job-nice = %v, want 4", got["job-nice"])
	}
	if _, err := applyArgs(t, "--config", writeConfig(t, "job-nice: 1\nsupervisor-nice: 2\n")); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("both names in one file: error %v, want given twice", err)
	}
}

func TestConfigFileBadInput(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"port: 7000\nbogus: 1\n", `line 2: unknown key "bogus"`},
		{"port: seven\n", `line 1: port: want an integer, got "seven"`},
		{"dev: maybe\n", `line 1: dev: want a boolean`},
		{"\n\nlease: soon\n", `line 3: lease: want a duration`},
		{"join: {a: 1}\n", `line 1: join: want a list of strings`},
		{"name: [a]\n", `line 1: name: want a string`},
		{"port: 1\nport: 2\n", `line 2: key "port" given twice (first on line 1)`},
		{"- a\n", `line 1: want a mapping`},
		{"port: [\n", `yaml:`},
	} {
		_, err := applyArgs(t, "--config", writeConfig(t, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.body, err, tc.want)
		}
	}
	if _, err := applyArgs(t, "--config", filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing config file was accepted")
	}
}

// The example shipped in contrib/ (and used by contrib/foreman.service) loads.
func TestConfigFileContribExample(t *testing.T) {
	got, err := applyArgs(t, "--config", "../../contrib/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got["data-dir"] != "/var/lib/foreman" || got["bootstrap-expect"] != 3 || len(got["join"].([]string)) != 3 {
		t.Errorf("contrib/agent.yaml: data-dir=%v bootstrap-expect=%v join=%v", got["data-dir"], got["bootstrap-expect"], got["join"])
	}
	unit, err := os.ReadFile("../../contrib/foreman.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "--config /etc/foreman/agent.yaml") {
		t.Error("contrib/foreman.service does not start the agent with --config /etc/foreman/agent.yaml")
	}
}
