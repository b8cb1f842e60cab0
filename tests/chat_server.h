// An in-process OpenAI-compatible chat-completions server (cpp-httplib) for tests and benchmarks: each test scripts
// what it answers. It speaks the real protocol over real sockets; the client under test is never stubbed.
#pragma once

#include <httplib.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "local_server.h"

namespace spark::testing {

class ChatServer {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&, int call)>;

  // `routes`: more of a real server's endpoints (llama.cpp's GET /props, POST /tokenize), set on the same server.
  explicit ChatServer(Handler handler, size_t threads = 8, std::function<void(httplib::Server&)> routes = {})
      : handler_(std::move(handler)),
        server_(
            [this, routes = std::move(routes)](httplib::Server& s) {
              if (routes) routes(s);
              s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
                int call;
                {
                  std::lock_guard lock(mu_);
                  bodies_.push_back(req.body);
                  authorization_.push_back(req.get_header_value("Authorization"));
                  call = static_cast<int>(bodies_.size()) - 1;
                }
                handler_(req, res, call);
              });
            },
            threads) {}
  ChatServer(const ChatServer&) = delete;
  ChatServer& operator=(const ChatServer&) = delete;

  std::string url() const { return server_.url(); }
  int port() const { return server_.port(); }
  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::vector<std::string> authorizations() const {
    std::lock_guard lock(mu_);
    return authorization_;
  }
  size_t calls() const {
    std::lock_guard lock(mu_);
    return bodies_.size();
  }

  // The prompt (first user message) of a request body.
  static std::string prompt_of(const std::string& body) {
    return nlohmann::json::parse(body)["messages"][0]["content"].get<std::string>();
  }

  // A chat.completion answer as vLLM and OpenAI send it.
  static std::string completion(const std::string& content, const std::string& finish_reason = "stop",
                                bool usage = true, size_t prompt_tokens = 100, size_t completion_tokens = 20) {
    nlohmann::json j = {{"id", "chatcmpl-test"},
                        {"object", "chat.completion"},
                        {"created", 1763700000},
                        {"model", "test-model"},
                        {"choices",
                         {{{"index", 0},
                           {"message", {{"role", "assistant"}, {"content", content}}},
                           {"finish_reason", finish_reason}}}}};
    if (usage)
      j["usage"] = {{"prompt_tokens", prompt_tokens},
                    {"completion_tokens", completion_tokens},
                    {"total_tokens", prompt_tokens + completion_tokens}};
    return j.dump();
  }

 private:
  Handler handler_;
  mutable std::mutex mu_;
  std::vector<std::string> bodies_, authorization_;
  LocalServer server_;  // last: it stops before the members its handler uses go away
};

}  // namespace spark::testing
