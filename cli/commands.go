package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/httpapi"
)

// clientCommands returns every command of this package that talks to an
// agent over the API; NewApp adds them to the App's commands. Each carries
// its own --addr (and the App may carry one too: the innermost explicit one
// wins).
func clientCommands() []*ucli.Command {
	return []*ucli.Command{
		submitCommand(),
		runCommand(),
		logsCommand(),
		eventsCommand(),
		jobCommand(),
		workflowCommand(),
		artifactsCommand(),
		nodeCommand(),
		queueCommand(),
		namespaceCommand(),
		scheduleCommand(),
		clusterCommand(),
		operatorCommand(),
		aclCommand(),
	}
}

// clientFlags are the connection flags of every client command.
func clientFlags() []ucli.Flag {
	return []ucli.Flag{
		// No EnvVars: an env-set flag would count as "set" on every
		// command and hide an explicit --addr given to the App.
		&ucli.StringFlag{
			Name:        "addr",
			Usage:       "address of any agent's API (default $" + httpapi.EnvAddr + ", else " + httpapi.DefaultAddr + ")",
			DefaultText: "$" + httpapi.EnvAddr,
		},
		&ucli.StringFlag{
			Name:        "token",
			Usage:       "ACL token secret, sent as Authorization: Bearer (default $" + httpapi.EnvToken + ")",
			DefaultText: "$" + httpapi.EnvToken,
		},
		&ucli.StringFlag{
			Name:        "namespace",
			Usage:       "namespace to act in (default $" + httpapi.EnvNamespace + ", else default; \"*\" lists every namespace)",
			DefaultText: "$" + httpapi.EnvNamespace,
		},
		&ucli.StringFlag{Name: "ca-cert", Usage: "CA certificate (PEM) to verify an https agent with (default $" + httpapi.EnvCACert + ")"},
		&ucli.StringFlag{Name: "client-cert", Usage: "client certificate (PEM) to present (default $" + httpapi.EnvClientCert + ")"},
		&ucli.StringFlag{Name: "client-key", Usage: "key of --client-cert (default $" + httpapi.EnvClientKey + ")"},
	}
}

// WithClientFlags adds the connection flags to a leaf command's own.
func WithClientFlags(flags ...ucli.Flag) []ucli.Flag {
	return append(flags, clientFlags()...)
}

// newClient builds the API client from --addr (the innermost command that
// set it explicitly, then FOREMAN_ADDR, then the default) and FOREMAN_TOKEN.
func newClient(c *ucli.Context) (*httpapi.Client, error) {
	cl, err := httpapi.NewClient(innermost(c, "addr"), tlsOptions(c))
	if err != nil {
		return nil, Exitf(1, "%v", err)
	}
	return cl, nil
}

// innermost is the value of flag from the innermost command that set it
// explicitly ("" when none did; the client then reads the environment).
func innermost(c *ucli.Context, flag string) string {
	for _, x := range c.Lineage() {
		for _, n := range x.LocalFlagNames() {
			if n == flag {
				if v := x.String(flag); v != "" {
					return v
				}
			}
		}
	}
	return ""
}

// ClientOptions are the API client options of a command: its TLS files,
// token and namespace (see tlsOptions). Commands that build their own http.Client use
// ClientTLS for the same files.
func ClientOptions(c *ucli.Context) httpapi.ClientOptions { return tlsOptions(c) }

// ClientTLS is the TLS config of --ca-cert, --client-cert, --client-key (or
// their environment variables); nil when none is set.
func ClientTLS(c *ucli.Context) (*tls.Config, error) {
	o := tlsOptions(c)
	cfg, err := httpapi.ClientTLS(o.CACert, o.ClientCert, o.ClientKey)
	if err != nil {
		return nil, Exitf(1, "%v", err)
	}
	return cfg, nil
}

// tlsOptions reads --ca-cert, --client-cert and --client-key from the
// innermost command that set each (empty ones fall back to FOREMAN_CACERT,
// FOREMAN_CLIENT_CERT, FOREMAN_CLIENT_KEY in httpapi.NewClient).
func tlsOptions(c *ucli.Context) httpapi.ClientOptions {
	return httpapi.ClientOptions{CACert: innermost(c, "ca-cert"), ClientCert: innermost(c, "client-cert"), ClientKey: innermost(c, "client-key"),
		Token: innermost(c, "token"), Namespace: innermost(c, "namespace")}
}

// Error turns any error into a one-line ucli.ExitCoder, so Main prints
// exactly one line on stderr and exits non-zero.
func Error(err error) error {
	if err == nil {
		return nil
	}
	var ec ucli.ExitCoder
	if errors.As(err, &ec) {
		return err
	}
	msg := err.Error()
	var ae *httpapi.APIError
	if errors.As(err, &ae) {
		msg = ae.Message
		if ae.Code == httpapi.CodeNoLeader || ae.Code == httpapi.CodeUnreachable {
			msg += " (the cluster may be electing a leader; retry)"
		}
	}
	return Exitf(1, "%s", msg)
}

// Exitf is a one-line error with an exit code.
func Exitf(code int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ")), " ")
	return ucli.Exit(msg, code)
}

// silentExit ends the process with code and prints nothing (the command
// already explained itself, as run does when the job fails).
type silentExit int

func (e silentExit) Error() string { return "" }
func (e silentExit) ExitCode() int { return int(e) }

// Stderrf prints one diagnostic line to stderr.
func Stderrf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "foreman: "+format+"\n", args...)
}
