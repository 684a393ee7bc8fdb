package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/foreman-sched/foreman/cli"
)

// runApp runs main.go's App with args and returns what it printed.
func runApp(t *testing.T, args ...string) string {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	if err := cli.Run(context.Background(), app, append([]string{"foreman"}, args...)); err != nil {
		t.Fatalf("foreman %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o bashdefault -o default -F _foreman_complete foreman",
		"zsh":  "compdef _foreman foreman",
	} {
		script := runApp(t, "completion", shell)
		if !strings.Contains(script, want) || !strings.Contains(script, "--generate-bash-completion") {
			t.Errorf("completion %s: script lacks %q:\n%s", shell, want, script)
		}
		sh, err := exec.LookPath(shell)
		if err != nil {
			if shell == "bash" {
				t.Fatalf("bash is needed to check the bash script: %v", err)
			}
			t.Logf("SKIP syntax check of the %s script: %s is not installed", shell, shell)
			continue
		}
		p := filepath.Join(t.TempDir(), "foreman."+shell)
		if err := os.WriteFile(p, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sh, "-n", p).CombinedOutput(); err != nil {
			t.Errorf("%s -n rejects the %s script: %v\n%s", shell, shell, err, out)
		}
	}
}
