package agent

import (
	"encoding/json"
	"fmt"
)

// CredentialEnv is the environment variable the client snippets below read an
// endpoint's credential from, as `switchboard connect` does by default.
const CredentialEnv = "SWITCHBOARD_CREDENTIAL"

// FromEnv is the credential as a snippet names it when it is read from
// CredentialEnv: Claude Code expands ${VAR} in .mcp.json, and a shell in a
// double-quoted argument, so the file or the command line holds no secret.
const FromEnv = "${" + CredentialEnv + "}"

// ClientConfig is a Claude Code .mcp.json with one entry, switchboard, for the
// endpoint at mcpURL, which sends credential (or FromEnv) as its bearer token.
func ClientConfig(mcpURL, credential string) string {
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	cfg := map[string]map[string]server{"mcpServers": {"switchboard": {
		Type: "http", URL: mcpURL, Headers: map[string]string{"Authorization": "Bearer " + credential},
	}}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return string(b)
}

// ClaudeAddCommand is the `claude mcp add` line for the same entry. With FromEnv
// the shell expands the variable, and refuses to run the line while it is unset,
// rather than saving a header of "Bearer " and nothing after it.
func ClaudeAddCommand(mcpURL, credential string) string {
	if credential == FromEnv {
		credential = "${" + CredentialEnv + ":?export " + CredentialEnv + " first}"
	}
	return fmt.Sprintf("claude mcp add --transport http switchboard %s --header \"Authorization: Bearer %s\"", mcpURL, credential)
}

// ExportLine sets CredentialEnv to credential in a POSIX shell.
func ExportLine(credential string) string {
	return "export " + CredentialEnv + "=" + credential
}
