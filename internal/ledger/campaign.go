package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

type campaignItem struct {
	PK     string `dynamodbav:"pk"`
	SK     string `dynamodbav:"sk"`
	GSI2PK string `dynamodbav:"gsi2pk"`
	GSI2SK string `dynamodbav:"gsi2sk"`
	record.Campaign
}

const skCampaign = "CAMPAIGN"

func campaignPK(tenant, id string) string { return tenantPrefix(tenant) + "CAMPAIGN#" + id }

// campaignGSI is the gsi2 partition of a tenant's campaigns: apart from its operations' (so that
// neither listing sees the other's items) and still scoped by the tenant.
func campaignGSI(tenant string) string { return "CAMPAIGNS#" + tenant }

// CreateCampaign stores a new campaign (conditional on its key being free), its plan intent,
// if any, unsent and unclaimed. A campaign with the same id already stored answers a
// *ConflictError: a retry of the same submit converges on it.
func (s *Store) CreateCampaign(ctx context.Context, c record.Campaign) (*record.Campaign, error) {
	if err := checkID("tenant", c.Tenant); err != nil {
		return nil, err
	}
	if err := checkID("campaign id", c.ID); err != nil {
		return nil, err
	}
	c.CreatedAt, c.Version = s.now(), 1
	c.PlanClaims, c.PlanUnsent, c.PlanClaimedBy, c.PlanSentAt = 0, len(c.PlanIntent) > 0, "", time.Time{}
	av, err := attributevalue.MarshalMap(campaignItem{
		PK: campaignPK(c.Tenant, c.ID), SK: skCampaign,
		GSI2PK: campaignGSI(c.Tenant), GSI2SK: fmtTime(c.CreatedAt) + "#" + c.ID, Campaign: c,
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: encode campaign %s: %w", c.ID, err)
	}
	// The put leaves its random id in last_write: its own retry after a lost response is still
	// the put that created the campaign, not a conflict.
	write := s.NewID()
	av[attrLastWrite] = &types.AttributeValueMemberS{Value: write}
	err = s.putIf(ctx, av, keyFree())
	if failed, old := conditionFailed(err); failed {
		cur, rerr := s.oldOrRead(ctx, old, key(campaignPK(c.Tenant, c.ID), skCampaign))
		if rerr == nil && wroteLast(cur, write) {
			return &c, nil
		}
		return nil, &record.ConflictError{What: "campaign " + c.ID}
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: create campaign %s: %w", c.ID, err)
	}
	return &c, nil
}

// SettleCampaign records the campaign's final status and what it committed, once: the
// condition is
//
//	attribute_exists(pk) AND (attribute_not_exists(outcome) OR outcome = :outcome)
//
// so a retry of the same settle succeeds and another outcome is a conflict (ErrConflict).
func (s *Store) SettleCampaign(ctx context.Context, tenant, id, outcome, committed string) error {
	return s.settleCampaign(ctx, tenant, id, outcome, committed, "")
}

// FailCampaign records that a step of the Campaign execution itself failed: the outcome
// failed with what the legs committed and the reason, once, under SettleCampaign's condition
// (an outcome already recorded is a conflict, ErrConflict, and stands).
func (s *Store) FailCampaign(ctx context.Context, tenant, id, committed, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return fmt.Errorf("%w: a campaign's failure needs its reason", record.ErrInvalidArgument)
	}
	return s.settleCampaign(ctx, tenant, id, "failed", committed, reason)
}

func (s *Store) settleCampaign(ctx context.Context, tenant, id, outcome, committed, reason string) error {
	if checkID("tenant", tenant) != nil || checkID("campaign id", id) != nil || outcome == "" || committed == "" {
		return fmt.Errorf("%w: tenant, campaign id, outcome and committed are required", record.ErrInvalidArgument)
	}
	cond := expression.AttributeExists(expression.Name(AttrPK)).And(expression.Or(
		expression.AttributeNotExists(expression.Name("outcome")),
		expression.Name("outcome").Equal(expression.Value(outcome))))
	up := expression.Set(expression.Name("outcome"), expression.Value(outcome)).
		Set(expression.Name("committed"), expression.Value(committed)).
		Set(expression.Name("settled_at"), expression.Value(s.now()))
	if reason != "" {
		up = up.Set(expression.Name("reason"), expression.Value(record.Clip(reason, 1000)))
	}
	err := s.updateCampaign(ctx, tenant, id, cond, nextVersion(up))
	if failed, _ := conditionFailed(err); failed {
		return &record.ConflictError{What: "campaign " + id + " outcome"}
	}
	if err != nil {
		return fmt.Errorf("ledger: settle campaign %s: %w", id, err)
	}
	return nil
}

// SetCampaignApproval records which approval decides the campaign (the latest round: an
// escalation asks again under a new id). The condition is attribute_exists(pk).
func (s *Store) SetCampaignApproval(ctx context.Context, tenant, id, approvalID string) error {
	if checkID("tenant", tenant) != nil || checkID("campaign id", id) != nil || checkID("approval id", approvalID) != nil {
		return fmt.Errorf("%w: tenant, campaign id and approval id are required", record.ErrInvalidArgument)
	}
	err := s.updateCampaign(ctx, tenant, id, expression.AttributeExists(expression.Name(AttrPK)),
		nextVersion(expression.Set(expression.Name("approval_id"), expression.Value(approvalID))))
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("ledger: set approval of campaign %s: %w", id, record.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("ledger: set approval of campaign %s: %w", id, err)
	}
	return nil
}

// nextVersion adds one to the campaign's version with up (from 1 for a campaign stored before
// it counted): a retried write counts again, so versions are ordered, not consecutive.
func nextVersion(up expression.UpdateBuilder) expression.UpdateBuilder {
	return up.Set(expression.Name("version"),
		expression.Plus(expression.IfNotExists(expression.Name("version"), expression.Value(1)), expression.Value(1)))
}

// updateCampaign applies up to the tenant's campaign id under cond; the caller reads a failed
// condition from the error.
func (s *Store) updateCampaign(ctx context.Context, tenant, id string, cond expression.ConditionBuilder, up expression.UpdateBuilder) error {
	_, err := s.update(ctx, key(campaignPK(tenant, id), skCampaign), cond, up, "")
	return err
}

// GetCampaign returns the tenant's campaign id; another tenant's id is ErrNotFound.
func (s *Store) GetCampaign(ctx context.Context, tenant, id string) (*record.Campaign, error) {
	if checkID("tenant", tenant) != nil || checkID("campaign id", id) != nil {
		return nil, record.ErrNotFound
	}
	item, err := s.getItem(ctx, key(campaignPK(tenant, id), skCampaign))
	if err != nil {
		if errors.Is(err, record.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("ledger: get campaign %s: %w", id, err)
	}
	return decodeCampaign(item, tenant)
}

func decodeCampaign(item map[string]types.AttributeValue, tenant string) (*record.Campaign, error) {
	var it campaignItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("ledger: decode campaign: %w", err)
	}
	if it.Tenant != tenant { // defence in depth: the key already scopes it
		return nil, record.ErrNotFound
	}
	return &it.Campaign, nil
}

// ListCampaigns lists the tenant's campaigns, newest first (gsi2). The cursor is opaque and is
// refused if it does not belong to this tenant's campaign listing.
func (s *Store) ListCampaigns(ctx context.Context, tenant string, limit int, cursor string) (record.Page[*record.Campaign], error) {
	if err := checkID("tenant", tenant); err != nil {
		return record.Page[*record.Campaign]{}, err
	}
	start, err := decodeCursor(cursor, func(k map[string]string) bool {
		return strings.HasPrefix(k[AttrPK], tenantPrefix(tenant)+"CAMPAIGN#") && k[AttrSK] == skCampaign &&
			(k[attrGSI2PK] == "" || k[attrGSI2PK] == campaignGSI(tenant)) && onlyKeys(k, AttrPK, AttrSK, attrGSI2PK, attrGSI2SK)
	})
	if err != nil {
		return record.Page[*record.Campaign]{}, err
	}
	e, err := build(expression.NewBuilder().WithKeyCondition(expression.Key(attrGSI2PK).Equal(expression.Value(campaignGSI(tenant)))))
	if err != nil {
		return record.Page[*record.Campaign]{}, err
	}
	out, err := s.query(ctx, query{index: indexTenant, e: e, limit: clampLimit(limit), start: start, backward: true})
	if err != nil {
		return record.Page[*record.Campaign]{}, fmt.Errorf("ledger: list campaigns of tenant %s: %w", tenant, err)
	}
	var items []*record.Campaign
	for _, item := range out.Items {
		c, err := decodeCampaign(item, tenant)
		if errors.Is(err, record.ErrNotFound) {
			continue
		}
		if err != nil {
			return record.Page[*record.Campaign]{}, err
		}
		items = append(items, c)
	}
	return pageOf(items, out.LastEvaluatedKey)
}
