// Package packaging holds no code: it is the directory of the systemd units, the
// environment file, the .deb recipe (nfpm.yaml, maintainer scripts) and the build
// scripts that turn Switchboard into an installable appliance. Its tests check
// those files with the tools that will judge them in production
// (systemd-analyze, sh), so a change that weakens the sandbox fails CI.
package packaging
