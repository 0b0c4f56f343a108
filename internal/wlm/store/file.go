package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/sluicelab/sluice/internal/wlm/catalog"
)

// Revision identifies one stored version of the catalog. It increases
// with every save; 0 means nothing is stored yet.
type Revision uint64

// ErrConflict is returned by Save when the stored catalog is no longer
// the revision the caller read: someone else saved in between. The
// caller loads again and retries its change on what it loads.
var ErrConflict = errors.New("store: the catalog changed since it was read")

// File keeps the catalog in one JSON file, replaced atomically. Its
// revision counts the saves of this process, from 1 for the file found
// at Load; File assumes no other process writes the file. It is safe for
// concurrent use.
type File struct {
	path string
	revs revisions // of the file's contents
}

// revisions counts the saves of a store and refuses a save conditioned
// on a revision that is no longer current. It is safe for concurrent
// use; its lock is the store's one lock, held across the store's I/O.
type revisions struct {
	mu  sync.Mutex
	rev Revision // guarded by mu
}

// save runs write under the lock if expected is the current revision,
// and counts a revision when write succeeds. It returns the revision
// then current, and ErrConflict or write's error.
func (r *revisions) save(expected Revision, write func() error) (Revision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if expected != r.rev {
		return r.rev, ErrConflict
	}
	if err := write(); err != nil {
		return r.rev, err
	}
	r.rev++
	return r.rev, nil
}

// NewFile returns the store of the catalog file at path.
func NewFile(path string) *File { return &File{path: path} }

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Load reads and validates the file. A missing file returns (nil, 0,
// nil); a file that cannot be read or decoded is an error naming it.
func (f *File) Load(ctx context.Context) (*catalog.Catalog, Revision, error) {
	f.revs.mu.Lock()
	defer f.revs.mu.Unlock()
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.revs.rev = 0
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("catalog %s: %w", f.path, err)
	}
	c, err := Unmarshal(f.path, data)
	if err != nil {
		return nil, 0, err
	}
	f.revs.rev = max(f.revs.rev, 1)
	return c, f.revs.rev, nil
}

// Save replaces the file with c if its revision is still expected, else
// returns ErrConflict. The new contents are written to a temporary file
// in the same directory, synced, renamed over the old file, and the
// directory is synced, so a crash leaves either the old or the new
// catalog, never a mix. On error the revision is unchanged.
func (f *File) Save(ctx context.Context, c *catalog.Catalog, expected Revision) (Revision, error) {
	return f.revs.save(expected, func() error {
		data, err := Marshal(c)
		if err != nil {
			return err
		}
		if err := writeAtomic(f.path, data); err != nil {
			return fmt.Errorf("save catalog %s: %w", f.path, err)
		}
		return nil
	})
}

// writeAtomic replaces the file at path with data: temporary file,
// fsync, rename, fsync of the directory.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// Memory keeps nothing: Load finds no catalog and Save only counts
// revisions. It is the store of a Manager without a catalog file. It is
// safe for concurrent use.
type Memory struct {
	revs revisions
}

// Load returns (nil, current revision, nil).
func (m *Memory) Load(ctx context.Context) (*catalog.Catalog, Revision, error) {
	m.revs.mu.Lock()
	defer m.revs.mu.Unlock()
	return nil, m.revs.rev, nil
}

// Save counts a revision if expected is current, else ErrConflict.
func (m *Memory) Save(ctx context.Context, c *catalog.Catalog, expected Revision) (Revision, error) {
	return m.revs.save(expected, func() error { return nil })
}
