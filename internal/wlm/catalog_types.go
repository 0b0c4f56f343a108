package wlm

import (
	"context"

	"github.com/sluicelab/sluice/internal/wlm/catalog"
	"github.com/sluicelab/sluice/internal/wlm/store"
)

// The catalog's types, as package catalog defines them.
type (
	Catalog   = catalog.Catalog
	LinkDef   = catalog.LinkDef
	Rule      = catalog.Rule
	Pool      = catalog.Pool
	UserDef   = catalog.UserDef
	Settings  = catalog.Settings
	Emulation = catalog.Emulation
	Duration  = catalog.Duration
	Action    = catalog.Action
)

// Catalog constants, as package catalog defines them.
const (
	DefaultLink = catalog.DefaultLink
	Unlimited   = catalog.Unlimited
	Abort       = catalog.Abort
	Penalty     = catalog.Penalty
)

// Store keeps the catalog. Load returns the stored catalog and its
// revision (nil and 0 when none is stored yet); Save stores c if the
// stored revision is still expected, returning the new one, else fails
// with store.ErrConflict. The Manager saves every change before it takes
// effect, conditioned on the revision it last loaded or saved; on a
// conflict it loads again and retries the change on what it loaded, or,
// for a store with a Shared() bool method that returns true (store.Etcd),
// fails it with 40001. store.File (a JSON file replaced atomically),
// store.Memory and store.Etcd implement it.
type Store interface {
	Load(ctx context.Context) (*catalog.Catalog, store.Revision, error)
	Save(ctx context.Context, c *catalog.Catalog, expected store.Revision) (store.Revision, error)
}
