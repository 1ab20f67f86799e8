// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/corral-dev/corral/agent"
	"github.com/corral-dev/corral/mcp"
	"github.com/corral-dev/corral/sdk"
)

// A product embeds the agent: the policy file bounds what the model may
// do, the report says what it did and where each of its figures came
// from. (Compiled, not run: it needs a corral server and a model.)
func ExampleRun() {
	client, err := sdk.New(sdk.WithBaseURL("http://127.0.0.1:8080"), sdk.WithAPIKey(os.Getenv("CORRAL_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	policy, err := mcp.LoadPolicy("examples/report-agent/policy.toml")
	if err != nil {
		log.Fatal(err)
	}
	trajectory, err := os.Create("trajectory.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	defer trajectory.Close()
	rep, err := agent.Run(context.Background(), agent.Config{
		Client:     client,
		Policy:     policy,
		Task:       "Analyse sales.csv: total units, the best month, a bar chart (chart.png) and report.md.",
		Inputs:     []string{"examples/report-agent/sales.csv"},
		ModelURL:   "http://localhost:11434/v1", // Ollama; any OpenAI-compatible endpoint
		Model:      "qwen2.5-coder",
		OutDir:     "out",
		Trajectory: trajectory,
	})
	if err != nil {
		log.Fatal(err) // the run could not start: a bad configuration
	}
	fmt.Println("stopped:", rep.StopReason, rep.StopMessage)
	for _, c := range rep.SummaryFigures {
		if c.Verified {
			fmt.Printf("%s comes from %s (%s, %s)\n", c.Figure, c.CallID, c.Tool, c.Field)
		} else {
			fmt.Printf("%s is in no tool output: unverified\n", c.Figure)
		}
	}
	for _, sb := range rep.Sandboxes {
		fmt.Println("sandbox", sb.ID, "deleted:", sb.Deleted)
	}
}
