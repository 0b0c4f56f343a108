package etcd

import "crypto/tls"

// TLSConfig is c.tlsConfig, for tests.
func TLSConfig(c Config) (*tls.Config, error) { return c.tlsConfig() }
