// Package packaging holds ovfwd's .deb and .rpm packaging: nfpm.yaml, the
// hardened systemd unit, the udev rule for VFIO, the maintainer scripts and
// build.sh, which `make package` runs. Its one Go API is the unit file's text
// (Unit), for the testbed; its test builds the packages, installs the .deb on
// this machine and purges it again.
package packaging
