package cli

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/spl-dev/spl/env"
	"github.com/spl-dev/spl/mcptools"
)

func newMCPCommand(a *app) *cobra.Command {
	var actor string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve spl's tools, resources and prompts to an agent over MCP (stdio)",
		Long: `Run a Model Context Protocol server on stdin and stdout, for an MCP client
(a coding agent) to start: its tools save and read session checkpoints,
resume sessions, append and read records, and read runs; its resources
are checkpoints, sessions and threads; its prompts are resume_work (a
thread's latest checkpoint, as the text an agent reads at the start of a
session) and checkpoint_protocol. It uses the embedded log of the data
directory, or --server. What a tool writes is by --actor (default
$SPL_ACTOR) unless the call names another. It runs until the client
closes stdin. spl serve offers the same at /mcp (streamable HTTP).

Register it with an MCP client:

  {"mcpServers": {"spl": {"command": "spl", "args": ["mcp"],
    "env": {"SPL_ACTOR": "did:sync:agent:dev"}}}}`,
		Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			// Not under --timeout: the session lasts as long as its client.
			c, err := a.open(cmd.Context())
			if err != nil {
				return fmt.Errorf("mcp: %w", err)
			}
			s, err := mcptools.New(c, mcptools.Write, mcptools.Options{Actor: actor})
			if err != nil {
				return err
			}
			if err := s.Run(cmd.Context(), &mcp.StdioTransport{}); err != nil {
				return fmt.Errorf("mcp: %w", err)
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&actor, "actor", env.Actor(), "actor DID of what the tools write (default $SPL_ACTOR)")
	return cmd
}

func newPromptCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prompt checkpoint-protocol",
		Short: "Print an agent prompt: the checkpoint protocol",
		Long: `Print the checkpoint protocol, the instructions an agent follows to keep
its work across sessions in spl (when it saves a checkpoint, what it
holds, how it resumes), to paste into any agent's instructions. The MCP
server offers the same as the prompt checkpoint_protocol.`,
		Args: cobra.ExactArgs(1),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if args[0] != "checkpoint-protocol" {
				return usagef("prompt: unknown prompt %q (there is checkpoint-protocol)", args[0])
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), mcptools.CheckpointProtocol)
			return err
		}),
	}
	return cmd
}
