package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/registry"
)

// The simulated agents' ids, as examples/media-buy.json names them.
const (
	SellerID     = "sim-seller"
	GovernanceID = "sim-governance"
)

// OtherSellerIDs are the other simulated sellers, as examples/campaign.json names them: a
// campaign buys across several sellers.
var OtherSellerIDs = []string{"sim-seller-2", "sim-seller-3"}

// NoReplaySellerID is a simulated seller that declares no replay window (adcp.idempotency
// supported: false) and never replays: a mutating call may reach it once and must never be
// resent. The crash tests place buys and changes at it.
const NoReplaySellerID = "sim-seller-once"

// otherSellers are the simulated sellers beside SellerID, each its own MCP server.
func otherSellers() []string { return append(slices.Clone(OtherSellerIDs), NoReplaySellerID) }

// AgentSecretPrefix prefixes the names of the agents' credential secrets.
const AgentSecretPrefix = "buyflow/agents/"

// agentsFile is the document BUYFLOW_AGENTS=<file> points at to use real agents: the agent
// registry (internal/adcp RegistryConfig) plus the credential values by credential_ref, which
// the local stack stores as secrets. Credentials never travel in the functions' environment.
//
//	{"agents": [{"id": "acme-sales", "role": "seller", "mcp_url": "https://…/mcp",
//	             "credential_ref": "buyflow/agents/acme-sales", "webhook": {…}}, …],
//	 "credentials": {"buyflow/agents/acme-sales": "<bearer token>"},
//	 "simulated": ["governance"]}
//
// Simulated keeps some of the simulated agents next to the real ones: "seller" (as SellerID)
// and "governance" (as GovernanceID). A real seller can so be tried with the simulated
// governance agent, which no seller's test setup provides.
type agentsFile struct {
	Agents      []adcp.Agent      `json:"agents"`
	Credentials map[string]string `json:"credentials"`
	Simulated   []string          `json:"simulated,omitempty"`
}

// The simulated agents an agents file can keep, by name, and the ids they serve as.
var simulatedRoles = map[string]string{"seller": SellerID, "governance": GovernanceID}

// stackAgents is what the stack's functions are told about agents.
type stackAgents struct {
	registry    []byte            // BUYFLOW_AGENTS
	credentials map[string]string // secret name → value

	seller     *adcptest.Seller
	others     map[string]*adcptest.Seller // the other simulated sellers, by id (otherSellers)
	governance *adcptest.Governance
	sellerURL  string
	govURL     string
	srv        *server
	stopTick   func()

	simulated []string     // of an agents file: the simulated agents to add (AgentsFile.Simulated)
	sim       *stackAgents // the simulated agents started for them
}

func (a *stackAgents) close() {
	if a.sim != nil {
		a.sim.close()
	}
	if a.stopTick != nil {
		a.stopTick()
	}
	if a.srv != nil {
		a.srv.close()
	}
	if a.seller != nil {
		a.seller.Close()
	}
	for _, o := range a.others {
		o.Close()
	}
	if a.governance != nil {
		a.governance.Close()
	}
}

// schemaValidator returns the simulated agents' request validator, over the schemas the
// functions embed (or the folder $BUYFLOW_ADCP_SCHEMAS names).
func schemaValidator() (*adcptest.Validator, error) {
	v, err := adcptest.NewValidator("")
	if err != nil {
		return nil, fmt.Errorf("devstack: agent schemas: %w", err)
	}
	return v, nil
}

// loadAgentsFile reads a real-agents file and checks its registry.
func loadAgentsFile(path string) (*stackAgents, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("devstack: agents file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f agentsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("devstack: agents file %s: %w", path, err)
	}
	reg, err := json.Marshal(adcp.RegistryConfig{Agents: f.Agents})
	if err != nil {
		return nil, fmt.Errorf("devstack: agents file %s: %w", path, err)
	}
	if _, err := adcp.ParseRegistry(reg); err != nil {
		return nil, fmt.Errorf("devstack: agents file %s: %w", path, err)
	}
	var missing []error
	for _, ag := range f.Agents {
		if _, ok := f.Credentials[ag.CredentialRef]; !ok {
			missing = append(missing, fmt.Errorf("agent %s: no credentials[%q]", ag.ID, ag.CredentialRef))
		}
	}
	seen := map[string]bool{}
	for _, name := range f.Simulated {
		id, ok := simulatedRoles[name]
		switch {
		case !ok:
			missing = append(missing, fmt.Errorf("simulated %q: not one of \"seller\", \"governance\"", name))
		case seen[name]:
			missing = append(missing, fmt.Errorf("simulated %q: listed twice", name))
		}
		seen[name] = true
		for _, ag := range f.Agents {
			if ag.ID == id {
				missing = append(missing, fmt.Errorf("simulated %q: agent id %s is taken by a real agent", name, id))
			}
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, fmt.Errorf("devstack: agents file %s: %w", path, err)
	}
	return &stackAgents{registry: reg, credentials: f.Credentials, simulated: f.Simulated}, nil
}

// addSimulated starts the simulated agents an agents file keeps (AgentsFile.Simulated) and adds
// them to its registry and credentials; without any it does nothing.
func (a *stackAgents) addSimulated(sellerOpts adcptest.SellerOptions, govOpts adcptest.GovernanceOptions, step time.Duration) error {
	if len(a.simulated) == 0 {
		return nil
	}
	sim, err := startSimulatedAgents(sellerOpts, govOpts, step)
	if err != nil {
		return err
	}
	a.sim = sim
	var reg, simReg adcp.RegistryConfig
	if err := json.Unmarshal(a.registry, &reg); err != nil {
		return fmt.Errorf("devstack: agent registry: %w", err)
	}
	if err := json.Unmarshal(sim.registry, &simReg); err != nil {
		return fmt.Errorf("devstack: simulated agent registry: %w", err)
	}
	creds := maps.Clone(a.credentials)
	for _, name := range a.simulated {
		for _, ag := range simReg.Agents {
			if ag.ID == simulatedRoles[name] {
				reg.Agents = append(reg.Agents, ag)
				creds[ag.CredentialRef] = sim.credentials[ag.CredentialRef]
			}
		}
		switch name {
		case "seller":
			a.seller, a.sellerURL = sim.seller, sim.sellerURL
		case "governance":
			a.governance, a.govURL = sim.governance, sim.govURL
		}
	}
	raw, err := json.Marshal(reg)
	if err != nil {
		return fmt.Errorf("devstack: agent registry: %w", err)
	}
	if _, err := adcp.ParseRegistry(raw); err != nil {
		return fmt.Errorf("devstack: agent registry with simulated agents: %w", err)
	}
	a.registry, a.credentials = raw, creds
	return nil
}

// startSimulatedAgents serves a simulated seller and governance agent on one loopback port and
// describes them in a registry. The seller signs its webhooks (RFC 9421) with a fresh key whose
// JWKS the registry carries inline; tasks advance every step on their own.
func startSimulatedAgents(sellerOpts adcptest.SellerOptions, govOpts adcptest.GovernanceOptions, step time.Duration) (*stackAgents, error) {
	sellerTok, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	govTok, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	signer, jwks, err := adcptest.NewWebhookKey("buyflow-local-seller", nil)
	if err != nil {
		return nil, fmt.Errorf("devstack: seller webhook key: %w", err)
	}
	sellerOpts.Token = sellerTok
	sellerOpts.WebhookSigner, sellerOpts.JWKS = signer, jwks
	if sellerOpts.Behavior == "" {
		sellerOpts.Behavior = adcptest.SellerAsyncComplete
	}
	if sellerOpts.StepInterval == 0 {
		sellerOpts.StepInterval = step
	}
	govOpts.Token = govTok
	if govOpts.StepInterval == 0 {
		govOpts.StepInterval = step
	}
	a := &stackAgents{}
	if sellerOpts.Validator == nil || govOpts.Validator == nil {
		v, err := schemaValidator()
		if err != nil {
			return nil, err
		}
		if sellerOpts.Validator == nil {
			sellerOpts.Validator = v
		}
		if govOpts.Validator == nil {
			govOpts.Validator = v
		}
	}
	a.seller, a.governance = adcptest.NewSeller(sellerOpts), adcptest.NewGovernance(govOpts)
	a.others = map[string]*adcptest.Seller{}
	for _, id := range otherSellers() {
		o := sellerOpts
		if id == NoReplaySellerID {
			o.Idempotency = adcptest.IdempotencyUnsupported
		}
		a.others[id] = adcptest.NewSeller(o)
	}

	mux := http.NewServeMux()
	mux.Handle("/seller/", http.StripPrefix("/seller", a.seller))
	for id, o := range a.others {
		mux.Handle("/"+id+"/", http.StripPrefix("/"+id, o))
	}
	mux.Handle("/governance/", http.StripPrefix("/governance", a.governance))
	ln, err := listen("127.0.0.1:0")
	if err != nil {
		a.close()
		return nil, err
	}
	a.srv = serve(ln, mux)
	a.sellerURL = a.srv.url() + "/seller/mcp"
	a.govURL = a.srv.url() + "/governance/mcp"

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				a.seller.AdvanceDue()
				for _, o := range a.others {
					o.AdvanceDue()
				}
				a.governance.AdvanceDue()
			case <-ctx.Done():
				return
			}
		}
	}()
	a.stopTick = func() { cancel(); <-done }

	reg := adcp.RegistryConfig{Agents: []adcp.Agent{
		{ID: SellerID, Role: adcp.RoleSeller, MCPURL: a.sellerURL, CredentialRef: AgentSecretPrefix + SellerID,
			Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: jwks}},
		{ID: GovernanceID, Role: adcp.RoleGovernance, MCPURL: a.govURL, CredentialRef: AgentSecretPrefix + GovernanceID},
	}}
	a.credentials = map[string]string{AgentSecretPrefix + SellerID: sellerTok, AgentSecretPrefix + GovernanceID: govTok}
	// The other sellers take the same token and webhook key: one simulated seller deployment
	// serving several seller agents, each its own MCP server with its own buys.
	for _, id := range otherSellers() {
		reg.Agents = append(reg.Agents, adcp.Agent{ID: id, Role: adcp.RoleSeller, MCPURL: a.srv.url() + "/" + id + "/mcp",
			CredentialRef: AgentSecretPrefix + id, Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: jwks}})
		a.credentials[AgentSecretPrefix+id] = sellerTok
	}
	if a.registry, err = json.Marshal(reg); err != nil {
		a.close()
		return nil, fmt.Errorf("devstack: agent registry: %w", err)
	}
	if _, err := adcp.ParseRegistry(a.registry); err != nil {
		a.close()
		return nil, fmt.Errorf("devstack: agent registry: %w", err)
	}
	return a, nil
}

// signEveryRequest sets sign_requests on every agent of the registry doc.
func signEveryRequest(doc []byte) ([]byte, error) {
	var reg adcp.RegistryConfig
	if err := json.Unmarshal(doc, &reg); err != nil {
		return nil, fmt.Errorf("devstack: agent registry: %w", err)
	}
	for i := range reg.Agents {
		reg.Agents[i].SignRequests = true
	}
	out, err := json.Marshal(reg)
	if err != nil {
		return nil, fmt.Errorf("devstack: agent registry: %w", err)
	}
	return out, nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("devstack: random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// SimulatedAgents are the local stack's simulated seller and governance agent, for other test
// harnesses that run the functions (statemachine/stagepaths): served on one loopback port,
// tasks advancing on their own, the seller's webhooks RFC 9421-signed.
type SimulatedAgents struct {
	Seller *adcptest.Seller
	// Others are the other simulated sellers, by id (OtherSellerIDs, for campaigns, and
	// NoReplaySellerID).
	Others     map[string]*adcptest.Seller
	Governance *adcptest.Governance
	// SellerURL and GovernanceURL are the agents' MCP endpoints.
	SellerURL, GovernanceURL string
	// Registry is the agent registry (BUYFLOW_AGENTS) naming them SellerID and GovernanceID.
	Registry []byte
	// Credentials maps each agent's credential secret name (AgentSecretPrefix + id) to its
	// bearer token; store them in Secrets Manager.
	Credentials map[string]string

	a *stackAgents
}

// Close stops both agents and their ticker.
func (s *SimulatedAgents) Close() { s.a.close() }

// StartSimulatedAgents starts the agents as Start does (step: the task step interval, default
// 300 ms when zero and the options leave it unset).
func StartSimulatedAgents(seller adcptest.SellerOptions, governance adcptest.GovernanceOptions, step time.Duration) (*SimulatedAgents, error) {
	if step <= 0 {
		step = 300 * time.Millisecond
	}
	a, err := startSimulatedAgents(seller, governance, step)
	if err != nil {
		return nil, err
	}
	return &SimulatedAgents{Seller: a.seller, Others: a.others, Governance: a.governance, SellerURL: a.sellerURL, GovernanceURL: a.govURL,
		Registry: a.registry, Credentials: a.credentials, a: a}, nil
}

// LocalOperator is the principal that manages the local stack's agent registry (the CLI's
// --principal dev:operator, the dev header X-Buyflow-Principal).
const LocalOperator = "dev:operator"

// SeedAgents loads an agents document (internal/adcp RegistryConfig) into the registry store
// in table, as the CDK stack's seed custom resource does on a deploy: agents the store has
// already are left as they are.
func SeedAgents(ctx context.Context, api registry.API, table string, doc []byte) error {
	seed, err := agents.ParseSeed(string(doc), AgentSecretPrefix)
	if err != nil {
		return fmt.Errorf("devstack: agents seed: %w", err)
	}
	if _, err := registry.NewStore(api, table).Seed(ctx, seed, agents.ActorDeploy); err != nil {
		return fmt.Errorf("devstack: agents seed: %w", err)
	}
	return nil
}
