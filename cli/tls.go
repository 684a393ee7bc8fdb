package cli

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/certs"
)

// Default file names of `foreman tls` (Nomad's tls command's layout).
const (
	defaultCAFile    = "foreman-ca.pem"
	defaultCAKeyFile = "foreman-ca-key.pem"
)

// tlsCommand makes a cluster CA, agent and user certificates, and gossip
// keys. It works on local files only and never talks to an agent.
func tlsCommand() *ucli.Command {
	return commandGroup("tls", "create a cluster CA, certificates signed by it, and gossip keys (local files only)",
		&ucli.Command{
			Name:  "ca",
			Usage: "the cluster certificate authority",
			Subcommands: []*ucli.Command{{
				Name:  "create",
				Usage: "write a new CA: " + defaultCAFile + " and " + defaultCAKeyFile + " (mode 0600)",
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "dir", Value: ".", Usage: "directory to write into"},
					&ucli.IntFlag{Name: "days", Value: 5 * 365, Usage: "validity in days"},
					&ucli.StringFlag{Name: "common-name", Value: "foreman cluster CA", Usage: "the CA's subject common name"},
					JSONFlag,
				},
				Action: tlsCACreate,
			}},
		},
		&ucli.Command{
			Name:  "cert",
			Usage: "certificates signed by the cluster CA",
			Subcommands: []*ucli.Command{{
				Name:  "create",
				Usage: "write NODE-server.pem (--server: an agent) or NODE-client.pem (--client: a user) and its key",
				Description: `An agent certificate is named server.foreman (agents verify one another by that
name), localhost, 127.0.0.1, ::1, the node name and every --ip/--dns; give the addresses users
reach the agent at. A user certificate is named client.foreman and can authenticate to the API
only (never to raft or the agent-only paths).`,
				Flags: []ucli.Flag{
					&ucli.BoolFlag{Name: "server", Usage: "an agent certificate"},
					&ucli.BoolFlag{Name: "client", Usage: "a user (CLI, curl, browser) certificate"},
					&ucli.StringFlag{Name: "node", Usage: "node (or user) name: the certificate's common name and file name"},
					&ucli.StringSliceFlag{Name: "ip", Usage: "extra IP address the certificate is valid for (repeatable)"},
					&ucli.StringSliceFlag{Name: "dns", Usage: "extra DNS name the certificate is valid for (repeatable)"},
					&ucli.StringFlag{Name: "ca", Value: defaultCAFile, Usage: "the CA certificate"},
					&ucli.StringFlag{Name: "ca-key", Value: defaultCAKeyFile, Usage: "the CA key"},
					&ucli.StringFlag{Name: "dir", Value: ".", Usage: "directory to write into"},
					&ucli.IntFlag{Name: "days", Value: 365, Usage: "validity in days (capped at the CA's)"},
					JSONFlag,
				},
				Action: tlsCertCreate,
			}},
		},
		&ucli.Command{
			Name:  "gossip-key",
			Usage: "print a new random gossip encryption key (base64, 32 bytes) for --gossip-key",
			Flags: []ucli.Flag{JSONFlag},
			Action: func(c *ucli.Context) error {
				k := make([]byte, 32)
				if _, err := rand.Read(k); err != nil {
					return Error(err)
				}
				s := base64.StdEncoding.EncodeToString(k)
				if c.Bool("json") {
					return PrintJSON(c, map[string]string{"key": s})
				}
				fmt.Fprintln(Stdout(c), s)
				return nil
			},
		},
	)
}

// writtenFiles is the --json output of the create commands.
type writtenFiles struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

func tlsCACreate(c *ucli.Context) error {
	if c.Int("days") <= 0 {
		return Exitf(1, "--days: must be positive")
	}
	cert, key, err := certs.CreateCA(c.String("common-name"), time.Duration(c.Int("days"))*24*time.Hour)
	if err != nil {
		return Error(err)
	}
	out := writtenFiles{Cert: filepath.Join(c.String("dir"), defaultCAFile), Key: filepath.Join(c.String("dir"), defaultCAKeyFile)}
	return writeCertFiles(c, out, cert, key)
}

func tlsCertCreate(c *ucli.Context) error {
	server, client := c.Bool("server"), c.Bool("client")
	if server == client {
		return Exitf(1, "give exactly one of --server (an agent certificate) or --client (a user certificate)")
	}
	node := c.String("node")
	if node == "" {
		return Exitf(1, "--node: must be set (the node or user name)")
	}
	if node != filepath.Base(node) || node == "." || node == ".." {
		return Exitf(1, "--node %q: must not contain a path separator", node)
	}
	if c.Int("days") <= 0 {
		return Exitf(1, "--days: must be positive")
	}
	req := certs.CertRequest{Role: certs.RoleServer, Node: node, DNSNames: c.StringSlice("dns"),
		Validity: time.Duration(c.Int("days")) * 24 * time.Hour}
	suffix := "server"
	if client {
		req.Role, suffix = certs.RoleClient, "client"
	}
	for _, s := range c.StringSlice("ip") {
		ip := net.ParseIP(s)
		if ip == nil {
			return Exitf(1, "--ip %q: not an IP address", s)
		}
		req.IPs = append(req.IPs, ip)
	}
	caCert, err := os.ReadFile(c.String("ca"))
	if err != nil {
		return Exitf(1, "--ca: %v (create one with: foreman tls ca create)", err)
	}
	caKey, err := os.ReadFile(c.String("ca-key"))
	if err != nil {
		return Exitf(1, "--ca-key: %v", err)
	}
	cert, key, err := certs.CreateCert(caCert, caKey, req)
	if err != nil {
		return Exitf(1, "%v", err)
	}
	base := filepath.Join(c.String("dir"), node+"-"+suffix)
	return writeCertFiles(c, writtenFiles{Cert: base + ".pem", Key: base + "-key.pem"}, cert, key)
}

func writeCertFiles(c *ucli.Context, out writtenFiles, cert, key []byte) error {
	if err := certs.WriteFiles(out.Cert, cert, out.Key, key); err != nil {
		return Exitf(1, "%v", err)
	}
	if c.Bool("json") {
		return PrintJSON(c, out)
	}
	fmt.Fprintf(Stdout(c), "wrote %s\nwrote %s (keep it secret)\n", out.Cert, out.Key)
	return nil
}
