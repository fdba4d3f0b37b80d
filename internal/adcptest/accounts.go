package adcptest

import (
	"context"
	"fmt"
)

// account is one buyer relationship a principal set up with sync_accounts.
type account struct {
	owner string
	body  map[string]any // the core/account.json shape list_accounts answers
	key   string         // brand domain + operator: what makes two syncs the same account
}

// syncAccounts provisions (or finds) one account per entry: brand, operator and billing are
// required, as sync-accounts-request.json says; approval is instant (status active), as
// with a seller that needs no credit check.
func (s *Seller) syncAccounts(_ context.Context, c *call) reply {
	entries, _ := c.args["accounts"].([]any)
	if len(entries) == 0 {
		return reply{err: invalid("accounts", "accounts must name at least one account")}
	}
	dry, _ := c.args["dry_run"].(bool)
	out := make([]any, 0, len(entries))
	// IDs first: nextID takes the lock this loop holds.
	ids := make([]string, len(entries))
	for i := range ids {
		ids[i] = s.nextID("acct")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range entries {
		em, _ := e.(map[string]any)
		brand, _ := em["brand"].(map[string]any)
		domain, _ := brand["domain"].(string)
		operator, _ := em["operator"].(string)
		billing, _ := em["billing"].(string)
		switch {
		case domain == "":
			return reply{err: invalid(fmt.Sprintf("accounts[%d].brand.domain", i), "each account needs brand.domain")}
		case operator == "":
			return reply{err: invalid(fmt.Sprintf("accounts[%d].operator", i), "each account needs an operator domain")}
		case billing != "operator" && billing != "agent" && billing != "advertiser":
			return reply{err: invalid(fmt.Sprintf("accounts[%d].billing", i), "billing must be operator, agent or advertiser")}
		}
		key := domain + "|" + operator
		action := "created"
		a := s.accountByKey(c.owner, key)
		if a != nil {
			action = "unchanged"
			if a.body["billing"] != billing {
				action = "updated"
			}
		} else {
			a = &account{owner: c.owner, key: key, body: map[string]any{
				"account_id": ids[i], "name": domain + " via " + operator, "status": "active",
				"brand": brand, "operator": operator, "account_scope": "operator_brand",
			}}
		}
		if !dry {
			a.body["billing"] = billing
			if pt, ok := em["payment_terms"].(string); ok {
				a.body["payment_terms"] = pt
			}
			if action == "created" {
				s.accounts = append(s.accounts, a)
			}
		}
		res := cloneJSON(a.body)
		res["action"] = action
		res["billing"] = billing
		out = append(out, res)
	}
	body := map[string]any{"accounts": out}
	if dry {
		body["dry_run"] = true
	}
	return reply{body: body}
}

// accountByKey finds the caller's account for a brand and operator (under s.mu).
func (s *Seller) accountByKey(owner, key string) *account {
	for _, a := range s.accounts {
		if a.owner == owner && a.key == key {
			return a
		}
	}
	return nil
}

// listAccounts answers the caller's accounts, optionally filtered by status.
func (s *Seller) listAccounts(_ context.Context, c *call) reply {
	status := c.str("status")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []any{}
	for _, a := range s.accounts {
		if a.owner != c.owner || status != "" && a.body["status"] != status {
			continue
		}
		out = append(out, cloneJSON(a.body))
	}
	from, to, pg, e := pageOf(c, len(out))
	if e != nil {
		return reply{err: e}
	}
	return reply{body: map[string]any{"accounts": out[from:to], "pagination": pg}}
}
