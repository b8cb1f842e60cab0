// A cpp-httplib server on a free local port, serving on its own thread from construction to destruction. The
// protocol servers the tests script (chat_server.h, the embeddings server in embedder_test.cpp) are built on it.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace spark::testing {

class LocalServer {
 public:
  // `routes` registers the handlers before the server starts listening; `threads` requests are served at once.
  explicit LocalServer(const std::function<void(httplib::Server&)>& routes, size_t threads = 8) {
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    routes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LocalServer() {
    server_.stop();
    thread_.join();
  }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  // The OpenAI-style base URL ("…/v1").
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace spark::testing
