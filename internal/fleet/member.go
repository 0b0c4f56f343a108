package fleet

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Member is what an instance publishes about itself under
// <prefix>/instances/<name>, as JSON. It is a value, safe to copy.
type Member struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// AdminAddr and HTTPAddr are the admin console's and the HTTP API's
	// addresses, host:port, as the other instances reach them; "" when
	// the instance has none.
	AdminAddr string  `json:"admin_addr,omitempty"`
	HTTPAddr  string  `json:"http_addr,omitempty"`
	Routes    []Route `json:"routes"`
	// Revision is the catalog revision the instance applies (the etcd
	// revision of the catalog key; the file store's otherwise).
	Revision uint64 `json:"catalog_revision"`
	// StaleSince is when the instance lost its catalog store, nil while
	// it reaches it.
	StaleSince *time.Time `json:"catalog_stale_since,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	// Incarnation tells apart two runs of one name: random per process.
	Incarnation string `json:"incarnation"`
}

// Route is one route of a Member.
type Route struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Protocol string `json:"protocol"`
}

// encode is m as the JSON value of its key.
func (m Member) encode() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("fleet: encoding a member: %v", err)) // plain strings and times: cannot fail
	}
	return b
}

// decodeMember parses the value of an instance key.
func decodeMember(b []byte) (Member, error) {
	var m Member
	if err := json.Unmarshal(b, &m); err != nil {
		return Member{}, fmt.Errorf("fleet: instance record: %w", err)
	}
	if m.Name == "" {
		return Member{}, fmt.Errorf("fleet: instance record without a name")
	}
	return m, nil
}

// Instance is a live member as SHOW INSTANCES and GET /api/instances
// show it.
type Instance struct {
	Member
	// Self is true for the instance that answers.
	Self bool `json:"self"`
	// TTLLeft is what is left of the member's lease, in seconds, as etcd
	// answered; nil when it did not (etcd unreachable, no etcd, or the
	// answering instance itself without a lease).
	TTLLeft *float64 `json:"lease_ttl_left_seconds"`
	// LastSeen is when the answering instance last read the member's
	// record from etcd (a listing or a watch event); for Self, now.
	LastSeen time.Time `json:"last_seen"`
	// Stale is true when the member's catalog store is unreachable
	// (StaleSince is set).
	Stale bool `json:"catalog_stale"`
}

// sortInstances orders instances by name.
func sortInstances(in []Instance) {
	sort.Slice(in, func(i, j int) bool { return in[i].Name < in[j].Name })
}
