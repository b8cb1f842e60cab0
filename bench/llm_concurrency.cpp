// Concurrency of the LLM client against the in-process OpenAI-compatible server with a fixed latency per request.
// The peer is the ideal schedule: ceil(prompts / in-flight) × latency would be exact rounds; prompts / in-flight ×
// latency is the fluid bound the issue names (25 s for 200 prompts, 16 in flight, 2 s each). Usage:
//   spark_llm_concurrency [--prompts 200] [--concurrency 16] [--latency 2.0]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "chat_server.h"
#include "llm/llm_client.h"

using namespace spark;

int main(int argc, char** argv) {
  size_t prompts = 200, concurrency = 16;
  double latency = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--prompts") == 0) prompts = std::stoul(argv[i + 1]);
    else if (std::strcmp(argv[i], "--concurrency") == 0) concurrency = std::stoul(argv[i + 1]);
    else if (std::strcmp(argv[i], "--latency") == 0) latency = std::stod(argv[i + 1]);
  }
  testing::ChatServer server(
      [latency](const httplib::Request& req, httplib::Response& res, int) {
        std::this_thread::sleep_for(std::chrono::duration<double>(latency));
        const std::string prompt = testing::ChatServer::prompt_of(req.body);
        res.set_content(testing::ChatServer::completion("line " + std::to_string(prompt.size() % 50 + 1)),
                        "application/json");
      },
      concurrency * 2 + 4);
  LlmOptions o;
  o.base_url = server.url();
  o.model = "bench";
  o.concurrency = concurrency;
  std::vector<ChatRequest> requests;
  // Prompts of realistic size (about 2,000 tokens): the fixed instructions first, then per-case text.
  const std::string fixed(6000, 'x');
  for (size_t i = 0; i < prompts; ++i) requests.push_back({fixed + " case " + std::to_string(i) + std::string(2000, 'y'), nullptr});
  const auto t0 = std::chrono::steady_clock::now();
  auto results = LlmClient(o).complete_all(requests);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t ok = 0;
  for (const auto& r : results) ok += r ? 1 : 0;
  const double fluid = static_cast<double>(prompts) / static_cast<double>(concurrency) * latency;
  const double rounds = std::ceil(static_cast<double>(prompts) / static_cast<double>(concurrency)) * latency;
  std::printf("prompts %zu, in flight %zu, latency %.2f s: %zu answered, wall %.2f s\n", prompts, concurrency, latency,
              ok, wall);
  std::printf("ideal (fluid) %.2f s -> ratio %.3f (target <= 1.2); whole rounds %.2f s -> ratio %.3f\n", fluid,
              wall / fluid, rounds, wall / rounds);
  return ok == prompts && wall / fluid <= 1.2 ? 0 : 1;
}
