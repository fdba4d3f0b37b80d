package approve_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/approve"
	"github.com/buyflow/buyflow/internal/workflow"
)

const inboxPolicy = `{"threshold":"10000.00","currency":"USD","approvers":["UALICE","UBOB","URITA"],"on_timeout":"reject",
	"identities":{"arn:aws:iam::111122223333:user/alice":"UALICE","arn:aws:iam::111122223333:role/ApproverBob":"UBOB",
	"arn:aws:iam::111122223333:user/rita":"URITA","arn:aws:iam::999988887777:user/alice":"UALICE"}}`

// iamGet is an API Gateway v2 GET on an IAM route, with the identity API Gateway verified.
func iamGet(path, account, userARN string, params map[string]string) events.APIGatewayV2HTTPRequest {
	req := events.APIGatewayV2HTTPRequest{RawPath: path, PathParameters: params, Headers: map[string]string{}}
	req.RequestContext.HTTP.Method = "GET"
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: account, UserARN: userARN},
	}
	return req
}

func TestApproverInboxListsOnlyWhatWaitsForTheCaller(t *testing.T) {
	e := approvaltest.NewEnv(t, inboxPolicy)
	id := e.Request(approvaltest.Token(21)) // the fixture buy: asks UALICE and UBOB (URITA requested it)

	list := func(account, user string) (int, api.Inbox) {
		t.Helper()
		resp, err := e.Approver.HandleHTTP(e.Ctx, iamGet(approve.InboxPrefix, account, user, nil))
		if err != nil {
			t.Fatal(err)
		}
		var page api.Inbox
		if resp.StatusCode == 200 {
			if err := json.Unmarshal([]byte(resp.Body), &page); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, page
	}
	code, page := list(approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice")
	if code != 200 || page.Approver != approvaltest.Alice || len(page.Items) != 1 {
		t.Fatalf("alice: %d %+v", code, page)
	}
	it := page.Items[0]
	if it.ApprovalID != id || it.OperationID != approvaltest.OpID || it.Amount != "USD 12,500.00" || it.Seller != "sports-network" || it.ExpiresAt == "" {
		t.Errorf("alice's item = %+v", it)
	}
	// Bob signs in with a role of his own: any session of it is Bob.
	if code, page := list(approvaltest.Tenant, "arn:aws:sts::111122223333:assumed-role/ApproverBob/any-session"); code != 200 || len(page.Items) != 1 {
		t.Errorf("bob: %d %+v", code, page)
	}
	// The requester is mapped, but it is their own buy: nothing waits for them.
	if code, page := list(approvaltest.Tenant, "arn:aws:iam::111122223333:user/rita"); code != 200 || len(page.Items) != 0 {
		t.Errorf("requester: %d %+v", code, page)
	}
	// The same approver id from another account (another tenant) sees none of this tenant's.
	if code, page := list("999988887777", "arn:aws:iam::999988887777:user/alice"); code != 200 || len(page.Items) != 0 {
		t.Errorf("other tenant: %d %+v", code, page)
	}
	// An unmapped principal, a session name that copies a user's, and no identity are refused.
	for _, who := range []string{"arn:aws:iam::111122223333:user/mallory", "arn:aws:sts::111122223333:assumed-role/Other/alice"} {
		if code, _ := list(approvaltest.Tenant, who); code != 403 {
			t.Errorf("%s: %d, want 403", who, code)
		}
	}
	anon := iamGet(approve.InboxPrefix, "", "", nil)
	anon.RequestContext.Authorizer = nil
	if resp, _ := e.Approver.HandleHTTP(e.Ctx, anon); resp.StatusCode != 401 {
		t.Errorf("no identity: %d", resp.StatusCode)
	}

	// Alice opens it: what is bought, governance's verdict, and her own review link.
	open := func(account, user, apr string) (int, api.InboxApproval) {
		t.Helper()
		return openInbox(t, e, account, user, apr)
	}
	code, got := open(approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice", id)
	if code != 200 || len(got.Packages) != 3 || got.Packages[2].Flight != "2026-01-05 → 2026-02-28" || got.Packages[1].Budget != "USD 4,250.00" ||
		got.Governance == nil || got.Governance.Label != "Approved with 2 conditions" || len(got.Governance.Conditions) != 2 {
		t.Fatalf("open: %d %+v", code, got)
	}
	u, err := url.Parse(got.ReviewURL)
	if err != nil || !strings.HasPrefix(got.ReviewURL, approvaltest.BaseURL+"/v1/approvals/"+id+"?") || u.Query().Get("approver") != approvaltest.Alice {
		t.Fatalf("review url %q", got.ReviewURL)
	}
	// The link works on the confirm page, for alice.
	if resp := e.Get(u, "cli"); resp.StatusCode != 200 || !strings.Contains(resp.Body, "You are deciding as "+approvaltest.Alice) {
		t.Errorf("review link GET: %d", resp.StatusCode)
	}
	// Another tenant, the requester, and an id that does not exist all get the same 404.
	for _, c := range []struct{ account, user, id string }{
		{"999988887777", "arn:aws:iam::999988887777:user/alice", id},
		{approvaltest.Tenant, "arn:aws:iam::111122223333:user/rita", id},
		{approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice", "apr_nope"},
	} {
		if code, _ := open(c.account, c.user, c.id); code != 404 {
			t.Errorf("open %+v: %d, want 404", c, code)
		}
	}

	// Once decided it no longer waits for anyone.
	if resp := e.Post(u, "approve", ""); resp.StatusCode != 200 {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	if _, page := list(approvaltest.Tenant, "arn:aws:iam::111122223333:role/ApproverBob"); len(page.Items) != 0 {
		t.Errorf("after the decision bob still sees %+v", page.Items)
	}
	if code, _ := open(approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice", id); code != 404 {
		t.Errorf("open after the decision: %d", code)
	}
}

func TestApproverInboxHidesExpiredApprovals(t *testing.T) {
	e := approvaltest.NewEnv(t, inboxPolicy)
	e.Request(approvaltest.Token(22))
	e.Clock.Advance(time.Duration(approvaltest.TimeoutSeconds+1) * time.Second)
	resp, _ := e.Approver.HandleHTTP(e.Ctx, iamGet(approve.InboxPrefix, approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice", nil))
	if resp.StatusCode != 200 || strings.Contains(resp.Body, "apr_") {
		t.Errorf("after the expiry: %d %s", resp.StatusCode, resp.Body)
	}
}

func TestPolicyRefusesSessionIdentities(t *testing.T) {
	_, err := approvalpolicy.Parse([]byte(`{"approvers":["UALICE"],"identities":{"arn:aws:sts::111122223333:assumed-role/R/alice":"UALICE"}}`))
	if err == nil || !strings.Contains(err.Error(), "IAM user or role ARN") {
		t.Errorf("a session ARN as identity: %v", err)
	}
	_, err = approvalpolicy.Parse([]byte(`{"approvers":["UALICE"],"identities":{"arn:aws:iam::111122223333:user/alice":"UNOBODY"}}`))
	if err == nil || !strings.Contains(err.Error(), "neither an approver") {
		t.Errorf("an identity for no approver: %v", err)
	}
}

// A campaign's one approval is in the inbox once (not once per leg), with the legs it covers
// and their total, the amount its gate compared; it opens with the caller's review link, and
// it is tenant-isolated like a buy's: another account, the requester and a decided approval
// see nothing.
func TestApproverInboxListsACampaignApproval(t *testing.T) {
	e := approvaltest.NewEnv(t, inboxPolicy)
	legs := e.CreateCampaign(workflow.StatusAwaitingApproval, workflow.StatusCreating, workflow.StatusCheckingGovernance)
	id := e.RequestCampaign(approvaltest.Token(31), legs[0], legs[1])
	list := func(account, user string) api.Inbox {
		t.Helper()
		resp, err := e.Approver.HandleHTTP(e.Ctx, iamGet(approve.InboxPrefix, account, user, nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("list: %d %v", resp.StatusCode, err)
		}
		var page api.Inbox
		if err := json.Unmarshal([]byte(resp.Body), &page); err != nil {
			t.Fatal(err)
		}
		return page
	}
	page := list(approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice")
	if len(page.Items) != 1 {
		t.Fatalf("alice's inbox: %+v", page.Items)
	}
	it := page.Items[0]
	if it.ApprovalID != id || it.CampaignID != approvaltest.CampaignID || it.OperationID != "" || it.Amount != "USD 25,000.00" ||
		len(it.Legs) != 2 || it.Legs[0].OperationID != legs[0] || it.Legs[1].OperationID != legs[1] || it.Legs[1].Amount != "USD 12,500.00" ||
		!strings.Contains(it.Summary, "Spring") || !strings.Contains(it.Summary, "2 of 3 legs") || it.Requester != approvaltest.Requester {
		t.Errorf("the campaign's item = %+v", it)
	}
	for _, who := range []struct{ account, user string }{
		{"999988887777", "arn:aws:iam::999988887777:user/alice"},
		{approvaltest.Tenant, "arn:aws:iam::111122223333:user/rita"},
	} {
		if p := list(who.account, who.user); len(p.Items) != 0 {
			t.Errorf("%s sees %+v", who.user, p.Items)
		}
	}

	open := func(account, user string) (int, api.InboxApproval) {
		t.Helper()
		return openInbox(t, e, account, user, id)
	}
	code, got := open(approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice")
	if code != 200 || got.Amount != "USD 25,000.00" || len(got.Legs) != 2 || got.Legs[0].Governance == "" || got.Legs[0].Why == "" {
		t.Fatalf("open: %d %+v", code, got)
	}
	u, err := url.Parse(got.ReviewURL)
	if err != nil || !strings.HasPrefix(got.ReviewURL, approvaltest.BaseURL+"/v1/approvals/"+id+"?") || u.Query().Get("approver") != approvaltest.Alice {
		t.Fatalf("review url %q", got.ReviewURL)
	}
	for _, who := range []struct{ account, user string }{
		{"999988887777", "arn:aws:iam::999988887777:user/alice"},
		{approvaltest.Tenant, "arn:aws:iam::111122223333:user/rita"},
	} {
		if code, _ := open(who.account, who.user); code != 404 {
			t.Errorf("%s opens the campaign's approval: %d, want 404", who.user, code)
		}
	}
	if resp := e.Post(u, "approve", ""); resp.StatusCode != 200 {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	if p := list(approvaltest.Tenant, "arn:aws:iam::111122223333:role/ApproverBob"); len(p.Items) != 0 {
		t.Errorf("after the decision bob still sees %+v", p.Items)
	}
	if code, _ := open(approvaltest.Tenant, "arn:aws:iam::111122223333:user/alice"); code != 404 {
		t.Errorf("open after the decision: %d", code)
	}
}

// openInbox is GET InboxPrefix/{id} by the IAM user of account: the status, and the opened
// approval when it is 200.
func openInbox(t *testing.T, e *approvaltest.Env, account, user, id string) (int, api.InboxApproval) {
	t.Helper()
	resp, err := e.Approver.HandleHTTP(e.Ctx, iamGet(approve.InboxPrefix+"/"+id, account, user, map[string]string{"approval_id": id}))
	if err != nil {
		t.Fatal(err)
	}
	var out api.InboxApproval
	if resp.StatusCode == 200 {
		if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, out
}
