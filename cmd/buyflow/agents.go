package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/registry"
)

const agentsUsage = `agents list                        every agent of the registry
agents show ID                     one agent: its settings, capabilities and audit trail
agents add FILE                    add an agent (FILE: one agent's JSON, - for stdin)
agents update ID FILE              replace the fields FILE names (mcp_url, credential_ref,
                                   auth, webhook, settings)
agents disable ID [--reason R]     no new buys for it (its open buys finish)
agents enable ID
agents check ID                    call get_adcp_capabilities at it now`

// agents manages the agent registry (the caller must be one of the deployment's operators).
func (c cli) agents(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("agents takes a subcommand:\n" + agentsUsage)
	}
	sub, args := args[0], args[1:]
	// How many arguments each subcommand takes, but disable (an id and --reason).
	arity := map[string]int{"list": 0, "show": 1, "add": 1, "update": 2, "enable": 1, "check": 1}
	if n, ok := arity[sub]; ok && len(args) != n {
		return usageError(fmt.Sprintf("agents %s: wrong number of arguments\n%s", sub, agentsUsage))
	}
	path := func(id string, action ...string) string {
		return agents.Prefix + "/" + strings.Join(append([]string{url.PathEscape(id)}, action...), "/")
	}
	switch sub {
	case "list":
		recs, err := c.c.Agents(ctx)
		if err != nil {
			return err
		}
		return c.printAgents(recs)
	case "show":
		a, err := c.c.Agent(ctx, args[0])
		if err != nil {
			return err
		}
		return c.printAgent(a)
	case "add":
		body, err := c.readFile(args[0])
		if err != nil {
			return err
		}
		return c.changed(c.c.ChangeAgent(ctx, http.MethodPost, agents.Prefix, body))
	case "update":
		body, err := c.readFile(args[1])
		if err != nil {
			return err
		}
		return c.changed(c.c.ChangeAgent(ctx, http.MethodPatch, path(args[0]), body))
	case "disable":
		fs := flag.NewFlagSet("agents disable", flag.ContinueOnError)
		fs.SetOutput(c.err.w)
		reason := fs.String("reason", "", "why (kept in the audit trail)")
		// The id may come before or after --reason.
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			args = append(args[1:], args[0])
		}
		if err := fs.Parse(args); err != nil {
			return usageError("agents disable: " + err.Error())
		}
		if fs.NArg() != 1 {
			return usageError("agents disable takes one agent id")
		}
		body, _ := json.Marshal(agents.Reason{Reason: *reason})
		return c.changed(c.c.ChangeAgent(ctx, http.MethodPost, path(fs.Arg(0), "disable"), body))
	case "enable", "check":
		action := map[string]string{"enable": "enable", "check": "capabilities"}[sub]
		return c.changed(c.c.ChangeAgent(ctx, http.MethodPost, path(args[0], action), nil))
	}
	return usageError(fmt.Sprintf("agents: unknown subcommand %q\n%s", sub, agentsUsage))
}

func (c cli) readFile(name string) ([]byte, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(c.in, agents.MaxBodyBytes+1))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("read agent: %w", err)
	}
	return b, nil
}

func (c cli) changed(r registry.Record, err error) error {
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(c.out.w, r)
	}
	return c.printAgent(agents.Shown{Record: r})
}

func state(r registry.Record) string {
	if r.Disabled {
		return "disabled"
	}
	return "enabled"
}

func (c cli) printAgents(recs []registry.Record) error {
	if !c.json && len(recs) == 0 {
		c.out.println("the registry has no agents: add one with buyflow agents add FILE")
		return c.out.err
	}
	return c.report(agents.List{Agents: recs}, "AGENT\tROLE\tSTATE\tMCP URL\tCHECKED\tUPDATED BY", func(tp *printer) {
		for _, r := range recs {
			checked := "never"
			if r.Capabilities != nil {
				checked = r.Capabilities.CheckedAt.UTC().Format("2006-01-02 15:04 UTC")
				if r.Capabilities.Error != "" {
					checked += " (failed)"
				}
			}
			tp.printf("%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Role, state(r), r.MCPURL, checked, r.UpdatedBy)
		}
	})
}

func (c cli) printAgent(a agents.Shown) error {
	if err := c.report(a, "", func(tp *printer) { agentRows(tp, a) }); err != nil || c.json || len(a.History) == 0 {
		return err
	}
	return tabulate(c.out.w, "\nWHEN\tWHAT\tWHO\tDETAIL", func(tp *printer) {
		for _, h := range a.History {
			tp.printf("%s\t%s\t%s\t%s\n", h.At.UTC().Format("2006-01-02 15:04:05 UTC"), h.Action, h.Actor, h.Detail)
		}
	})
}

func agentRows(tp *printer, a agents.Shown) {
	tp.printf("agent\t%s\nrole\t%s\nstate\t%s\nmcp url\t%s\n", a.ID, a.Role, state(a.Record), a.MCPURL)
	if a.OAuth() {
		tokenURL := a.Auth.TokenURL
		if tokenURL == "" {
			tokenURL = "discovered from the agent's 401"
		}
		tp.printf("auth\tOAuth 2.0 client credentials, client %s, client secret %s (Secrets Manager)\ntoken endpoint\t%s\n", a.Auth.ClientID, a.CredentialRef, tokenURL)
		if len(a.Auth.Scopes) > 0 || a.Auth.Resource != "" || a.Auth.Audience != "" {
			tp.printf("token request\tscopes %q, resource %q, audience %q\n", strings.Join(a.Auth.Scopes, " "), a.Auth.Resource, a.Auth.Audience)
		}
	} else {
		tp.printf("auth\tstatic bearer token %s (Secrets Manager)\n", a.CredentialRef)
	}
	if a.Disabled && a.DisabledReason != "" {
		tp.printf("why disabled\t%s\n", a.DisabledReason)
	}
	if w := a.Webhook; w != nil {
		keys := w.JWKSURI
		if len(w.JWKS) > 0 {
			keys = "inline JWKS"
		}
		tp.printf("webhooks\t%s %s\n", w.Mode, strings.TrimSpace(keys+" "+w.HMACSecretRef+w.BearerSecretRef))
	}
	if len(a.Settings) > 0 {
		tp.printf("settings\t%s\n", a.Settings)
	}
	if cp := a.Capabilities; cp != nil {
		tp.printf("checked\t%s\n", cp.CheckedAt.UTC().Format("2006-01-02 15:04 UTC"))
		if cp.Error != "" {
			tp.printf("check failed\t%s\n", cp.Error)
		}
		replay := "none declared: buyflow never resends a create to it"
		if cp.ReplayTTLSeconds > 0 {
			replay = fmt.Sprintf("%ds", cp.ReplayTTLSeconds)
		}
		tp.printf("adcp versions\t%s\nspeaks\t%s\nreplay window\t%s\ntools\t%s\n", strings.Join(cp.SupportedVersions, ", "), speaks(cp.WireVersion, a.AdCPVersion), replay, strings.Join(cp.Tools, ", "))
		if len(cp.WebhookSigning) > 0 {
			tp.printf("webhook signing\t%s\n", cp.WebhookSigning)
		}
		tp.printf("signing\t%s\n", agents.SigningSummary(a.Record))
	}
	tp.printf("version\t%d, updated %s by %s\n", a.Version, a.UpdatedAt.UTC().Format("2006-01-02 15:04 UTC"), a.UpdatedBy)
}

// speaks says which AdCP version buyflow speaks with an agent and why: negotiated, or pinned.
func speaks(version, pin string) string {
	switch {
	case version == "":
		return "not negotiated yet (run buyflow agents check)"
	case pin == "":
		return "AdCP " + version + " (negotiated)"
	}
	return "AdCP " + version + " (pinned to " + pin + ")"
}
