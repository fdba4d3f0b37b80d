package adcptest

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// creative is one creative a principal synced.
type creative struct {
	owner            string
	id               string
	name             string
	format           string
	status           string // core creative-status: approved unless forced otherwise
	created, updated time.Time
}

// syncCreatives ingests creatives (creative_id, name, format_id and assets, as
// creative-asset.json requires) in a format the catalogue accepts, and applies the request's
// assignments to the caller's packages. Review is synchronous: a creative in a known format
// is approved. A creative in a format the seller does not accept fails on its own, as the
// response's per-item model says, without failing the others.
func (s *Seller) syncCreatives(_ context.Context, c *call) reply {
	items, _ := c.args["creatives"].([]any)
	if len(items) == 0 {
		return reply{err: invalid("creatives", "creatives must name at least one creative")}
	}
	dry, _ := c.args["dry_run"].(bool)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]any, 0, len(items))
	for i, it := range items {
		m, _ := it.(map[string]any)
		id, _ := m["creative_id"].(string)
		name, _ := m["name"].(string)
		fid, _ := m["format_id"].(map[string]any)
		format, _ := fid["id"].(string)
		if _, ok := m["assets"].(map[string]any); id == "" || name == "" || format == "" || !ok {
			return reply{err: invalid(fmt.Sprintf("creatives[%d]", i), "each creative needs creative_id, name, format_id and assets")}
		}
		if _, known := s.formats[format]; !known {
			out = append(out, map[string]any{"creative_id": id, "action": "failed", "errors": []any{
				&AdcpError{Code: "FORMAT_NOT_SUPPORTED", Message: "this seller does not accept format " + format + ": list_creative_formats names those it does",
					Field: fmt.Sprintf("creatives[%d].format_id", i), Recovery: "correctable"}}})
			continue
		}
		action := "created"
		cr := s.creatives[c.owner+"|"+id]
		if cr != nil {
			action = "unchanged"
			if cr.format != format {
				action = "updated"
			}
		}
		if !dry {
			if cr == nil {
				cr = &creative{owner: c.owner, id: id, status: "approved", created: c.now}
				s.creatives[c.owner+"|"+id] = cr
			}
			cr.format, cr.name, cr.updated = format, name, c.now
		}
		out = append(out, map[string]any{"creative_id": id, "action": action, "status": "approved"})
	}
	if asg, _ := c.args["assignments"].([]any); len(asg) > 0 && !dry {
		for i, a := range asg {
			am, _ := a.(map[string]any)
			cid, _ := am["creative_id"].(string)
			pid, _ := am["package_id"].(string)
			if e := s.assign(c.owner, pid, []string{cid}, fmt.Sprintf("assignments[%d]", i)); e != nil {
				return reply{err: e}
			}
		}
	}
	body := map[string]any{"creatives": out}
	if dry {
		body["dry_run"] = true
	}
	return reply{body: body}
}

// assign attaches creatives to one of owner's packages and, once every package of the buy
// has a creative, moves a pending_creatives buy on (pending_start, or active once its flight
// has begun). Called under s.mu.
func (s *Seller) assign(owner, packageID string, creativeIDs []string, field string) *AdcpError {
	mb, _ := s.packageOwner(owner, packageID)
	if mb == nil {
		return &AdcpError{Code: "PACKAGE_NOT_FOUND", Message: "no package " + packageID, Field: field + ".package_id", Recovery: "correctable"}
	}
	for _, cid := range creativeIDs {
		if s.creatives[owner+"|"+cid] == nil {
			return &AdcpError{Code: "CREATIVE_NOT_FOUND", Message: "no creative " + cid + ": sync it first", Field: field + ".creative_id", Recovery: "correctable"}
		}
	}
	if st, _ := mb.body["status"].(string); st == "canceled" || st == "completed" {
		return &AdcpError{Code: "INVALID_STATE", Message: "media buy is " + st + ": creatives can no longer be assigned", Field: field + ".package_id", Recovery: "correctable"}
	}
	s.assigned[packageID] = appendNew(s.assigned[packageID], creativeIDs...)
	s.advanceOnCreatives(mb)
	return nil
}

// advanceOnCreatives moves a pending_creatives buy whose packages all have creatives to
// pending_start, or to active when its start_time has passed (under s.mu).
func (s *Seller) advanceOnCreatives(mb *mediaBuy) {
	if st, _ := mb.body["status"].(string); st != "pending_creatives" {
		return
	}
	pkgs, _ := mb.body["packages"].([]any)
	if len(pkgs) == 0 {
		return
	}
	for _, p := range pkgs {
		pm, _ := p.(map[string]any)
		id, _ := pm["package_id"].(string)
		if len(s.assigned[id]) == 0 {
			return
		}
	}
	// A buy without start_time started asap: its flight is under way.
	next := "active"
	if st, _ := mb.body["start_time"].(string); st != "" {
		if t, err := time.Parse(time.RFC3339, st); err == nil && s.now().Before(t) {
			next = "pending_start"
		}
	}
	mb.body["status"] = next
	mb.body["updated_at"] = s.now().Format(time.RFC3339)
}

// packageOwner returns the owner's media buy holding the package (under s.mu).
func (s *Seller) packageOwner(owner, packageID string) (*mediaBuy, string) {
	for _, id := range s.buyOrder {
		mb := s.buys[id]
		if mb.owner != owner {
			continue
		}
		pkgs, _ := mb.body["packages"].([]any)
		for _, p := range pkgs {
			if pm, _ := p.(map[string]any); pm["package_id"] == packageID {
				return mb, id
			}
		}
	}
	return nil, ""
}

func appendNew(list []string, more ...string) []string {
	for _, m := range more {
		dup := false
		for _, l := range list {
			dup = dup || l == m
		}
		if !dup {
			list = append(list, m)
		}
	}
	return list
}

// packageAssignments are the creatives an update_media_buy assigns, per package id.
type packageAssignments struct {
	order     []string
	creatives map[string][]string
}

// creativeAssignments reads packages[].creative_assignments of an update and refuses a
// creative the caller never synced.
func (s *Seller) creativeAssignments(c *call) (packageAssignments, *AdcpError) {
	out := packageAssignments{creatives: map[string][]string{}}
	ups, _ := c.args["packages"].([]any)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, u := range ups {
		um, _ := u.(map[string]any)
		pid, _ := um["package_id"].(string)
		as, _ := um["creative_assignments"].([]any)
		for j, a := range as {
			am, _ := a.(map[string]any)
			cid, _ := am["creative_id"].(string)
			if s.creatives[c.owner+"|"+cid] == nil {
				return out, &AdcpError{Code: "CREATIVE_NOT_FOUND", Message: "no creative " + cid + ": sync it first",
					Field: fmt.Sprintf("packages[%d].creative_assignments[%d].creative_id", i, j), Recovery: "correctable"}
			}
			if _, seen := out.creatives[pid]; !seen {
				out.order = append(out.order, pid)
			}
			out.creatives[pid] = append(out.creatives[pid], cid)
		}
	}
	return out, nil
}

// listCreatives answers the caller's creative library, filtered by creative_ids and statuses,
// oldest first. A creative outlives the buys it was assigned to: canceling a buy leaves it
// in the library, reusable on the next one.
func (s *Seller) listCreatives(_ context.Context, c *call) reply {
	f, _ := c.args["filters"].(map[string]any)
	set := func(k string) map[string]bool {
		l, _ := f[k].([]any)
		if len(l) == 0 {
			return nil
		}
		m := map[string]bool{}
		for _, v := range l {
			if s, ok := v.(string); ok {
				m[s] = true
			}
		}
		return m
	}
	ids, statuses := set("creative_ids"), set("statuses")
	applied := []string{}
	if ids != nil {
		applied = append(applied, "creative_ids")
	}
	if statuses != nil {
		applied = append(applied, "statuses")
	}
	s.mu.Lock()
	var match []*creative
	for _, cr := range s.creatives {
		if cr.owner == c.owner && (ids == nil || ids[cr.id]) && (statuses == nil || statuses[cr.status]) {
			match = append(match, cr)
		}
	}
	sort.Slice(match, func(i, j int) bool {
		if !match[i].created.Equal(match[j].created) {
			return match[i].created.Before(match[j].created)
		}
		return match[i].id < match[j].id
	})
	from, to, pg, e := pageOf(c, len(match))
	if e != nil {
		s.mu.Unlock()
		return reply{err: e}
	}
	out := make([]any, 0, to-from)
	for _, cr := range match[from:to] {
		name := cr.name
		if name == "" {
			name = cr.id
		}
		out = append(out, map[string]any{"creative_id": cr.id, "name": name,
			"format_id": map[string]any{"agent_url": formatAgentURL, "id": cr.format}, "status": cr.status,
			"created_date": cr.created.Format(time.RFC3339), "updated_date": cr.updated.Format(time.RFC3339)})
	}
	s.mu.Unlock()
	return reply{body: map[string]any{"creatives": out, "pagination": pg,
		"query_summary": map[string]any{"total_matching": len(match), "returned": len(out), "filters_applied": applied}}}
}
