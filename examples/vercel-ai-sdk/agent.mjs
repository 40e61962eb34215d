// A refund agent on the Vercel AI SDK that learns across runs, offline: the model is the AI SDK's own
// test double (MockLanguageModelV3) scripted as a novice, the memory is a live platform.
//
//   MEMORY_PLATFORM_URL=http://127.0.0.1:8000 MEMORY_PLATFORM_API_KEY=mp_... node agent.mjs
//
// Runs 1-3 serve three customers. The novice model tries `issue_refund` first, is refused (the refund
// policy was not checked), then finds the order, checks the policy and refunds. `memoryMiddleware` saves
// each run as a task session and seals it `success`; the platform distils the runs into a workflow
// skill, served to everyone once three users taught it. Run 4 serves a fourth customer: the skill (and a
// fact stored about that customer) is in the model's prompt, and the scripted model follows its steps,
// so the refused call is gone. The exit code is 0 only if run 4 got the skill and made no failed call.

import { randomUUID } from "node:crypto";

import { generateText, jsonSchema, stepCountIs, tool, wrapLanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { MemoryClient } from "@memory-platform/client";
import { memoryMiddleware } from "@memory-platform/client/ai";

const memory = new MemoryClient(
  process.env.MEMORY_PLATFORM_URL ?? "http://127.0.0.1:8000",
  process.env.MEMORY_PLATFORM_API_KEY ?? "",
);
const batch = randomUUID().slice(0, 8);
const NOVICE_PLAN = ["issue_refund", "find_order", "check_refund_policy", "issue_refund"];
const usage = {
  inputTokens: { total: 100, noCache: 100, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 10, text: 10, reasoning: 0 },
};

/** The steps of the first learned skill in the prompt's memory block (`1. find_order(order_id)` lines). */
function learnedSteps(prompt) {
  const system = prompt.filter((message) => message.role === "system").map((message) => message.content).join("\n");
  const skills = system.match(/<learned_skills>([\s\S]*?)<\/learned_skills>/);
  if (!skills) return null;
  const steps = [...skills[1].matchAll(/^\d+\. (\w+)\(/gm)].map((match) => match[1]);
  return steps.length > 0 ? steps : null;
}

/** A scripted model: it follows a learned skill when its prompt has one, else the novice's plan. */
function scriptedModel(orderId) {
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const plan = learnedSteps(prompt) ?? NOVICE_PLAN;
      const done = prompt.filter((message) => message.role === "tool").length;
      if (done < plan.length) {
        return {
          content: [{ type: "tool-call", toolCallId: `call-${done}`, toolName: plan[done], input: JSON.stringify({ order_id: orderId }) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: "text", text: `Order ${orderId} is refunded.` }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
  });
}

/** The shop's tools; a refund is refused until the policy was checked in this run. */
function shopTools(log) {
  let policyChecked = false;
  const orderInput = jsonSchema({ type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] });
  const logged = (name, run) => async (input) => {
    try {
      const result = run(input);
      log.push(name);
      return result;
    } catch (error) {
      log.push(`${name} ✗`);
      throw error;
    }
  };
  return {
    find_order: tool({
      description: "Find an order by its id.",
      inputSchema: orderInput,
      execute: logged("find_order", ({ order_id }) => ({ order_id, total: 42.5, delivered: true })),
    }),
    check_refund_policy: tool({
      description: "Check whether an order may be refunded.",
      inputSchema: orderInput,
      execute: logged("check_refund_policy", () => {
        policyChecked = true;
        return { refundable: true, reason: "delivered less than 30 days ago" };
      }),
    }),
    issue_refund: tool({
      description: "Refund an order.",
      inputSchema: orderInput,
      execute: logged("issue_refund", ({ order_id }) => {
        if (!policyChecked) throw new Error("Refund refused: check_refund_policy must approve the order first.");
        return { order_id, refunded: 42.5 };
      }),
    }),
  };
}

async function agentRun(number, userId) {
  const orderId = `A-${1000 + number}`;
  const model = scriptedModel(orderId);
  const middleware = memoryMiddleware(memory, {
    userId,
    sessionId: `refund-${batch}-${number}`,
    task: true,
    // The run succeeded when the last refund went through.
    outcome: (run) => (run.toolCalls.at(-1)?.toolName === "issue_refund" && run.toolCalls.at(-1)?.failed === false ? "success" : "failure"),
  });
  const calls = [];
  await generateText({
    model: wrapLanguageModel({ model, middleware }),
    system: "You are the shop's refund agent.",
    tools: shopTools(calls),
    prompt: `Please refund my order ${orderId}, it arrived broken.`,
    stopWhen: stepCountIs(8),
  });
  await middleware.flush();
  const firstPrompt = model.doGenerateCalls[0].prompt;
  const learned = learnedSteps(firstPrompt);
  console.log(`run ${number} (${userId}): ${learned ? "skill in the prompt" : "no skill yet"}; calls: ${calls.join(", ")}`);
  return { calls, learned, memoryBlock: firstPrompt.find((message) => message.content?.startsWith?.("Memory:"))?.content };
}

async function skillServed(userId, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const { skills } = await memory.retrieveSkills({ task: "Please refund my order, it arrived broken.", user_id: userId, k: 3 });
    const skill = skills.find((found) => found.action_signature.join(",") === "find_order,check_refund_policy,issue_refund");
    if (skill) return skill;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`no refund workflow was served to ${userId} after ${timeoutMs} ms`);
}

const teachers = ["alice", "bob", "carol"].map((name) => `${name}-${batch}`);
for (const [index, userId] of teachers.entries()) {
  await agentRun(index + 1, userId);
}
const newcomer = `dave-${batch}`;
await memory.memories.create("semantic", newcomer, { name: "Refund preference", summary: "Dave wants refunds on his original card." });
const skill = await skillServed(newcomer);
console.log(`learned: "${skill.name}" (${skill.entry_type}), served to ${newcomer}: ${skill.instructions.replaceAll("\n", " ")}`);
const fourth = await agentRun(4, newcomer);
console.log(`\nrun 4's memory block:\n${fourth.memoryBlock}\n`);
// Run 4 called the skill's tools in order, so the middleware reported it applied before sealing the run.
const { review } = (await memory.skills.get(skill.id)).effectiveness;
console.log(`the skill's record since review: ${review.uses} use(s), ${review.applied} applied, ${review.successes} success(es)`);
const learnedIt = fourth.learned !== null && fourth.memoryBlock.includes("Dave wants refunds on his original card.");
process.exitCode = learnedIt && !fourth.calls.some((call) => call.endsWith("✗")) && review.applied >= 1 ? 0 : 1;
