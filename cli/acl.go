package cli

import (
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
	"github.com/foreman-sched/foreman/httpapi"
)

// aclCommand is `foreman acl`: bootstrap and tokens (docs/security.md).
func aclCommand() *ucli.Command {
	return commandGroup("acl", "bootstrap access control and manage tokens",
		ClientCommand("bootstrap", "issue the first management token (works once per cluster; the secret is shown only now)", "",
			aclBootstrap, JSONFlag),
		&ucli.Command{
			Name:  "internal-secret",
			Usage: "the secret agents present to each other's /v1/internal/ endpoints",
			Subcommands: []*ucli.Command{ClientCommand("rotate", "replace it with a new random one (never shown); the previous one stays accepted until the next "+
				"rotation, so no node is locked out while it catches up", "", aclRotateInternalSecret, JSONFlag)},
		},
		commandGroup("token", "create, list and revoke tokens",
			ClientCommand("create", "create a token; prints its secret once", "", aclTokenCreate, JSONFlag,
				&ucli.StringFlag{Name: "name", Usage: "a description"},
				&ucli.StringSliceFlag{Name: "role", Required: true, Usage: "ROLE[:NAMESPACE] (repeatable): read:NS, submit:NS, write:NS, exec:NS (NS or *; exec: foreman exec, which no other role grants), operator, management; client:NODE (NODE or *) for a client agent"},
				&ucli.DurationFlag{Name: "ttl", Usage: "expire after this long (default: never)"},
			),
			ClientCommand("ls", "list tokens (never their secrets)", "", aclTokenList, JSONFlag),
			ClientCommand("revoke", "revoke a token by accessor ID: it is refused from then on", "ACCESSOR_ID", aclTokenRevoke),
			ClientCommand("self", "show the token this command sends", "", aclTokenSelf, JSONFlag),
		),
	)
}

func aclRotateInternalSecret(c *ucli.Context) error {
	if c.NArg() > 0 {
		return Exitf(2, "internal-secret rotate takes no arguments (got %q)", c.Args().Slice())
	}
	return call(c, func(cl *api.Client) (*api.InternalRotateResponse, error) { return cl.RotateInternalSecret(c.Context) }, func(res *api.InternalRotateResponse) error {
		_, err := fmt.Fprintf(Stdout(c), "cluster-internal secret rotated (raft index %d)\n", res.Index)
		return err
	})
}

// ParseRole reads ROLE[:NAMESPACE], or client:NODE.
func ParseRole(s string) (fsm.ACLRole, error) {
	role, ns, _ := strings.Cut(strings.TrimSpace(s), ":")
	switch role {
	case httpapi.RoleRead, httpapi.RoleSubmit, httpapi.RoleWrite, httpapi.RoleExec:
		if ns == "" {
			return fsm.ACLRole{}, fmt.Errorf("--role %s: %s needs a namespace: %s:NAMESPACE (or %s:* for every one)", s, role, role, role)
		}
	case httpapi.RoleOperator, httpapi.RoleManagement:
		if ns != "" {
			return fsm.ACLRole{}, fmt.Errorf("--role %s: %s is cluster-wide and takes no namespace", s, role)
		}
	case httpapi.RoleClient:
		if ns == "" {
			return fsm.ACLRole{}, fmt.Errorf("--role %s: client needs the node it speaks for: client:NODE (or client:* for any)", s)
		}
		return fsm.ACLRole{Role: role, Node: ns}, nil
	default:
		return fsm.ACLRole{}, fmt.Errorf("--role %s: unknown role %q (want read, submit, write, exec, operator, management or client)", s, role)
	}
	return fsm.ACLRole{Role: role, Namespace: ns}, nil
}

func rolesString(roles []api.ACLRole) string {
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// printNewToken is the text of acl bootstrap and acl token create.
func printNewToken(c *ucli.Context, t *api.NewToken) error {
	w := Stdout(c)
	fmt.Fprintf(w, "Accessor ID: %s\n", t.AccessorID)
	fmt.Fprintf(w, "Secret:      %s\n", t.Secret)
	fmt.Fprintf(w, "Roles:       %s\n", rolesString(t.Roles))
	if !t.ExpiresAt.IsZero() {
		fmt.Fprintf(w, "Expires:     %s\n", t.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w, "The secret is shown only now; keep it (export FOREMAN_TOKEN=...).")
	return nil
}

func aclBootstrap(c *ucli.Context) error {
	return call(c, func(cl *api.Client) (*api.NewToken, error) { return cl.ACLBootstrap(c.Context) }, func(t *api.NewToken) error { return printNewToken(c, t) })
}

func aclTokenCreate(c *ucli.Context) error {
	req := api.TokenSpec{Name: c.String("name")}
	for _, r := range c.StringSlice("role") {
		role, err := ParseRole(r)
		if err != nil {
			return Exitf(2, "%v", err)
		}
		req.Roles = append(req.Roles, api.ACLRole(role))
	}
	if d := c.Duration("ttl"); d > 0 {
		req.TTL = api.Duration(d)
	} else if d < 0 {
		return Exitf(2, "--ttl %s: must be positive", d)
	}
	return call(c, func(cl *api.Client) (*api.NewToken, error) { return cl.CreateToken(c.Context, req) }, func(t *api.NewToken) error { return printNewToken(c, t) })
}

func aclTokenList(c *ucli.Context) error {
	now := time.Now()
	return list(c, "tokens", func(cl *api.Client) ([]api.Token, error) { return cl.ListTokens(c.Context) }, []string{"ACCESSOR", "NAME", "ROLES", "EXPIRES", "CREATED"}, func(tok api.Token) []any {
		exp := "never"
		if !tok.ExpiresAt.IsZero() {
			exp = tok.ExpiresAt.UTC().Format(time.RFC3339)
			if tok.Expired {
				exp += " (expired)"
			}
		}
		return []any{tok.AccessorID, orDash(tok.Name), rolesString(tok.Roles), exp, ago(tok.CreatedAt, now)}
	})
}

func aclTokenRevoke(c *ucli.Context) error {
	id, err := oneArg(c, "ACCESSOR_ID")
	if err != nil {
		return err
	}
	return act(c, func(cl *api.Client) (string, error) { return "token " + id + " revoked", cl.DeleteToken(c.Context, id) })
}

func aclTokenSelf(c *ucli.Context) error {
	return call(c, func(cl *api.Client) (*api.Token, error) { return cl.TokenSelf(c.Context) }, func(t *api.Token) error {
		_, err := fmt.Fprintf(Stdout(c), "Accessor ID: %s\nName:        %s\nRoles:       %s\n", t.AccessorID, orDash(t.Name), rolesString(t.Roles))
		return err
	})
}
