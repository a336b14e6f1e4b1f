package gormstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// Grant is one row of grants: a remembered approval (runtype.Grant), migration 0018. Its uses
// are counted by the conditional update that consumes one (useGrant), never read and written
// back, so that two instances racing for its last use cannot both have it.
type Grant struct {
	ID         string  `gorm:"column:id;primaryKey"`
	AgentID    string  `gorm:"column:agent_id"`
	ToolName   string  `gorm:"column:tool_name"`
	Scope      string  `gorm:"column:scope"`
	ScopeValue *string `gorm:"column:scope_value"`
	ResourceID *string `gorm:"column:resource_id"`
	ArgsMatch  *string `gorm:"column:args_match"`
	// ExpiresAt is compared with the time the consuming write is made at (the service's clock,
	// as a waiting call's deadline is).
	ExpiresAt *time.Time `gorm:"column:expires_at"`
	MaxUses   *int64     `gorm:"column:max_uses"`
	Uses      int64      `gorm:"column:uses"`
	CreatedBy *string    `gorm:"column:created_by"`
	// CreatorRoles and CreatorResources are JSON arrays (CreatorResources NULL: every
	// resource).
	CreatorRoles     string     `gorm:"column:creator_roles"`
	CreatorResources *string    `gorm:"column:creator_resources"`
	CreatedAt        time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	FromRunID        string     `gorm:"column:from_run_id"`
	FromToolCallID   string     `gorm:"column:from_tool_call_id"`
	RevokedAt        *time.Time `gorm:"column:revoked_at"`
	RevokedBy        *string    `gorm:"column:revoked_by"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (Grant) TableName() string { return "grants" }

// CreateGrant implements runs.Store.
func (s *Store) CreateGrant(ctx context.Context, g runtype.Grant) error {
	return s.tx(ctx, func(tx *gorm.DB) error { return insertGrant(tx, g) })
}

// insertGrant inserts grant g in the caller's transaction (a decision's, Decide).
func insertGrant(tx *gorm.DB, g runtype.Grant) error {
	roles, err := json.Marshal(g.CreatorRoles)
	if err != nil {
		return fmt.Errorf("grant %s: creator roles: %w", g.ID, err)
	}
	row := Grant{
		ID: g.ID, AgentID: g.AgentID, ToolName: g.ToolName, Scope: string(g.Scope), ScopeValue: g.ScopeValue,
		ResourceID: g.ResourceID, ArgsMatch: strOrNil(g.ArgsMatch), ExpiresAt: msOrNil(g.ExpiresAt),
		CreatedBy: g.CreatedBy, CreatorRoles: string(roles), CreatedAt: runtype.StoredTime(g.CreatedAt),
		FromRunID: g.FromRunID, FromToolCallID: g.FromToolCallID,
	}
	if g.MaxUses != nil {
		n := int64(*g.MaxUses)
		row.MaxUses = &n
	}
	if g.CreatorResources != nil {
		b, err := json.Marshal(g.CreatorResources)
		if err != nil {
			return fmt.Errorf("grant %s: creator resources: %w", g.ID, err)
		}
		v := string(b)
		row.CreatorResources = &v
	}
	if err := tx.Create(&row).Error; err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	return nil
}

// Grant implements runs.Store.
func (s *Store) Grant(ctx context.Context, id string) (*runtype.Grant, error) {
	var rows []Grant
	if err := s.db.WithContext(ctx).Where("id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read grant %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	g, err := rows[0].domain()
	return &g, err
}

// Grants implements runs.Store. A service matching a call reads the live grants of its agent
// and tool on (agent_id, tool_name, revoked_at).
func (s *Store) Grants(ctx context.Context, p runs.GrantsParams) ([]runtype.Grant, error) {
	q := s.db.WithContext(ctx).Model(&Grant{})
	if p.AgentID != nil {
		q = q.Where("agent_id = ?", *p.AgentID)
	}
	if p.ToolName != nil {
		q = q.Where("tool_name = ?", *p.ToolName)
	}
	if p.Scope != nil {
		q = q.Where("scope = ?", string(*p.Scope))
	}
	if p.Resources != nil {
		if len(p.Resources) == 0 {
			return []runtype.Grant{}, nil
		}
		q = q.Where("resource_id IN ?", p.Resources)
	}
	if p.Active != nil {
		at := runtype.StoredTime(p.At)
		live := "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) AND (max_uses IS NULL OR uses < max_uses)"
		if *p.Active {
			q = q.Where(live, at)
		} else {
			q = q.Where("NOT ("+live+")", at)
		}
	}
	q = q.Order("created_at DESC").Order("id DESC")
	if p.Limit > 0 {
		q = q.Limit(p.Limit)
	}
	if p.Offset > 0 {
		q = q.Offset(p.Offset)
	}
	var rows []Grant
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	out := make([]runtype.Grant, 0, len(rows))
	for _, r := range rows {
		g, err := r.domain()
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// UseGrant implements runs.Store. The lease check comes first (it locks the run's row, as
// every write of an execution does), then the grant's row (useGrant): every writer takes the
// two in that order.
func (s *Store) UseGrant(ctx context.Context, u runs.GrantUse) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		res := leased(tx, u.RunID, u.Lease).Where("last_seq = ?", u.After).Updates(s.checkpointSet(u.Checkpoint))
		if res.Error != nil {
			return fmt.Errorf("update run %s: %w", u.RunID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runs.ErrLeaseLost
		}
		if err := useGrant(tx, u.GrantID, u.At); err != nil {
			return err
		}
		d := u.Decision
		args := string(d.Args)
		row := ToolCall{
			RunID: u.RunID, ToolCallID: d.ToolCallID, ToolName: d.ToolName, Args: &args, RequiresApproval: true,
			State: string(d.Kind), CreatedAt: runtype.StoredTime(u.At), DecidedBy: d.DecidedBy, DecidedAt: msOrNil(&d.DecidedAt),
			Reason: d.Reason, Receipt: d.Receipt, GrantID: d.GrantID, PolicyRevision: d.PolicyRevision,
		}
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert the decision on %s: %w", d.ToolCallID, err)
		}
		return s.appendEvents(tx, u.RunID, u.After, u.At, u.Events, u.Outbox)
	})
}

// useGrant consumes one use of grant id at time at, in the caller's transaction: one
// conditional update, which the database serialises on the grant's row. ErrGrantSpent when
// the grant is revoked, expired at at, used up, or gone.
func useGrant(tx *gorm.DB, id string, at time.Time) error {
	res := tx.Model(&Grant{}).
		Where("id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) AND (max_uses IS NULL OR uses < max_uses)", id, runtype.StoredTime(at)).
		Update("uses", gorm.Expr("uses + 1"))
	if res.Error != nil {
		return fmt.Errorf("use grant %s: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return runs.ErrGrantSpent
	}
	return nil
}

// RevokeGrant implements runs.Store.
func (s *Store) RevokeGrant(ctx context.Context, id string, by *string, at time.Time) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Grant{}).Where("id = ? AND revoked_at IS NULL", id).
			Updates(map[string]any{"revoked_at": runtype.StoredTime(at), "revoked_by": by})
		if res.Error != nil {
			return fmt.Errorf("revoke grant %s: %w", id, res.Error)
		}
		if res.RowsAffected > 0 {
			return nil
		}
		var n int64
		if err := tx.Model(&Grant{}).Where("id = ?", id).Count(&n).Error; err != nil {
			return fmt.Errorf("read grant %s: %w", id, err)
		}
		if n == 0 {
			return runs.ErrNoSuchGrant
		}
		return runs.ErrStale
	})
}

// domain is the grant as the run service knows it.
func (r Grant) domain() (runtype.Grant, error) {
	g := runtype.Grant{
		ID: r.ID, AgentID: r.AgentID, ToolName: r.ToolName, Scope: runtype.GrantScope(r.Scope), ScopeValue: r.ScopeValue,
		ResourceID: r.ResourceID, ArgsMatch: rawOrNil(r.ArgsMatch), ExpiresAt: utcOrNil(r.ExpiresAt), Uses: int(r.Uses),
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC(), FromRunID: r.FromRunID, FromToolCallID: r.FromToolCallID,
		RevokedAt: utcOrNil(r.RevokedAt), RevokedBy: r.RevokedBy,
	}
	if r.MaxUses != nil {
		n := int(*r.MaxUses)
		g.MaxUses = &n
	}
	if err := json.Unmarshal([]byte(r.CreatorRoles), &g.CreatorRoles); err != nil {
		return g, fmt.Errorf("grant %s: creator roles: %w", r.ID, err)
	}
	if r.CreatorResources != nil {
		if err := json.Unmarshal([]byte(*r.CreatorResources), &g.CreatorResources); err != nil {
			return g, fmt.Errorf("grant %s: creator resources: %w", r.ID, err)
		}
		if g.CreatorResources == nil {
			g.CreatorResources = []string{}
		}
	}
	return g, nil
}

func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}
