// Package packaging holds what installs sluice on a machine, and the test
// that a release installs and runs:
//
//   - sluice.service, the systemd unit (/lib/systemd/system), and
//     sluice.default, the environment file it reads (/etc/default/sluice,
//     mode 0640: SLUICE_ADMIN_PASSWORD, SLUICE_HTTP_TOKEN, SLUICE_OPTS);
//   - nfpm.yaml, the Debian package, with postinst (creates the system
//     user sluice, sets the ownership of /etc/sluice and /var/lib/sluice)
//     and postrm (purge removes /var/lib/sluice);
//   - install_test.go, which runs scripts/release for the host's
//     architecture, checks the binary is static and the archive and the
//     .deb hold what they promise, installs the .deb into a throwaway
//     root with dpkg, runs the installed binary against the test
//     PostgreSQL and has systemd-analyze verify the installed unit.
//
// The package has no Go code of its own: the release build is
// scripts/release, the man pages and completion come from the hidden
// `sluice gen-docs` command.
package packaging
