package gormstore

import (
	"context"
	"encoding/base64"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"interlock/receipt"
	"interlock/runtype"
)

var _ receipt.KeyStore = (*Store)(nil)

// SigningKeys implements receipt.KeyStore.
func (s *Store) SigningKeys(ctx context.Context) ([]receipt.StoredKey, error) {
	var rows []ReceiptKey
	if err := s.db.WithContext(ctx).Order("generation DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read receipt keys: %w", err)
	}
	out := make([]receipt.StoredKey, len(rows))
	for i, r := range rows {
		seed, err := base64.RawURLEncoding.DecodeString(r.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("receipt key %d (%s) is not base64url: %w", r.Generation, r.KeyID, err)
		}
		out[i] = receipt.StoredKey{Generation: r.Generation, ID: r.KeyID, Seed: seed, CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}

// AddSigningKey implements receipt.KeyStore: an insert that does nothing when the generation
// is taken, then a read of the generation's row in the same transaction, which tells whose key
// it holds (a count of rows affected would not: MySQL's upsert counts a found row as one).
func (s *Store) AddSigningKey(ctx context.Context, k receipt.StoredKey) (bool, error) {
	var stored bool
	err := s.tx(ctx, func(tx *gorm.DB) error {
		row := ReceiptKey{Generation: k.Generation, KeyID: k.ID, PrivateKey: base64.RawURLEncoding.EncodeToString(k.Seed), CreatedAt: runtype.StoredTime(k.CreatedAt)}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
			return fmt.Errorf("insert receipt key %d: %w", k.Generation, err)
		}
		var got ReceiptKey
		if err := tx.Where("generation = ?", k.Generation).Take(&got).Error; err != nil {
			return fmt.Errorf("read receipt key %d back: %w", k.Generation, err)
		}
		stored = got.KeyID == k.ID && got.PrivateKey == row.PrivateKey
		return nil
	})
	return stored, err
}
