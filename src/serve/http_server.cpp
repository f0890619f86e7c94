#include "mo/serve/http_server.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/strings.h"
#include "mo/serve/openai_response.h"
#include "mo/serve/tokenize_api.h"
#include "connection_threads.h"
#include "http_connection.h"

namespace mo::serve {

using nlohmann::json;
using namespace std::chrono_literals;

// httplib's task queue as a thread per connection (ConnectionThreads).
class ThreadsQueue : public httplib::TaskQueue {
 public:
  ThreadsQueue(std::shared_ptr<ConnectionThreads> threads, int port) : threads_(std::move(threads)), port_(port) {}
  void enqueue(std::function<void()> fn) override { threads_->enqueue(std::move(fn)); }
  void shutdown() override { threads_->shutdown(5.0, port_); }
  void on_idle() override { threads_->make_room(); }

 private:
  std::shared_ptr<ConnectionThreads> threads_;
  int port_;
};

// httplib's server with each connection handed to `serve_socket`, which checks the request head before
// httplib's parser sees it; process_request (protected there) parses and answers a request on any Stream.
struct HttplibServer : httplib::Server {
  using httplib::Server::process_request;
  std::function<void(int)> serve_socket;

 private:
  bool process_and_close_socket(socket_t sock) override {
    serve_socket(sock);
    return true;
  }
};

struct HttpServer::Impl {
  ServingLoop& loop;
  ApiContext ctx;
  HttpOptions opt;
  HttplibServer http;
  std::atomic<std::uint64_t> next_id{1};
  int bound_port = 0;
  int listen_fd = -1;
  std::shared_ptr<ConnectionThreads> threads;  // made by httplib when serving starts
  // Streams whose response is not yet fully written; shared, as the last one ends on its connection's thread.
  std::shared_ptr<std::atomic<int>> open_streams = std::make_shared<std::atomic<int>>(0);

  Impl(ServingLoop& l, ApiContext c, HttpOptions o) : loop(l), ctx(std::move(c)), opt(std::move(o)) {}

  void routes();
  void serve_socket(int fd);
  void process(httplib::Stream& conn, const HeadReader& head);
  void handle_generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void respond_whole(const httplib::Request& req, httplib::Response& res, const ApiRequest& r, const ResponseIds& ids,
                     const std::shared_ptr<RequestStream>& stream);
  void respond_stream(httplib::Response& res, const std::shared_ptr<ApiRequest>& r, const ResponseIds& ids,
                      const std::shared_ptr<RequestStream>& stream);
  ResponseIds new_ids(bool chat) {
    return {
        fmt::format("{}-{:016x}{:08x}", chat ? "chatcmpl" : "cmpl", std::chrono::system_clock::now().time_since_epoch().count(), next_id++),
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(), ctx.model_name};
  }
};

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  res.set_content(dump(error_body(e)), "application/json");
}

// Compares every byte whatever the first difference, so the time taken does not tell how much of a guessed key is right.
bool same_secret(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % std::max<std::size_t>(1, expected.size())]);
  return diff == 0;
}

std::vector<SeqSpec> specs_of(const ApiRequest& r, int max_model_len, const std::string& request_id) {
  std::vector<SeqSpec> specs;
  for (std::size_t p = 0; p < r.prompts.size(); ++p) {
    for (int j = 0; j < r.n; ++j) {
      SeqSpec s;
      s.choice = static_cast<int>(p) * r.n + j;
      s.prompt = r.prompts[p];
      s.params = r.params;
      // Choices of one seeded request differ from each other and are reproducible.
      if (s.params.seed) s.params.seed = *s.params.seed + static_cast<std::uint64_t>(j);
      s.max_total_tokens = max_model_len;
      s.prompt_logprobs = r.echo && r.logprobs;
      s.request_id = request_id;
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

void submit_or_throw(ServingLoop& loop, std::vector<SeqSpec> specs, const std::shared_ptr<RequestStream>& stream) {
  switch (loop.submit(std::move(specs), stream)) {
    case SubmitStatus::ok: return;
    case SubmitStatus::queue_full: {
      // 429, as vLLM and OpenAI answer an overload: clients retry it with backoff; 503 stays for shutting down.
      ApiError e(429, fmt::format("the server is busy: {} requests are waiting (max_queue_len); retry later", loop.max_queue_len()), "",
                 "server_error", "queue_full");
      e.retry_after_s = 1;
      throw e;
    }
    case SubmitStatus::shutting_down: throw ApiError(503, "the server is shutting down", "", "server_error", "shutting_down");
  }
}

}  // namespace

void HttpServer::Impl::respond_whole(const httplib::Request& req, httplib::Response& res, const ApiRequest& r, const ResponseIds& ids,
                                     const std::shared_ptr<RequestStream>& stream) {
  std::vector<ChoiceResult> results(r.prompts.size() * r.n);
  std::size_t finished = 0;
  const int client = socket_of_peer(req.remote_addr, req.remote_port);  // this thread's own connection
  auto next_check = std::chrono::steady_clock::now();
  while (finished < results.size()) {
    auto e = stream->pop(100ms);
    if (client >= 0 && std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + 100ms;
      if (peer_gone(client)) {  // nobody will read the answer: free the sequences now
        stream->cancel();
        return;
      }
    }
    if (!e) continue;
    if (!e->error.empty()) {
      stream->cancel();
      throw ApiError(e->error_status, e->error, "", "server_error");
    }
    results[e->choice].add(*e);
    if (!e->finish_reason.empty()) ++finished;
  }
  res.set_content(dump(r.chat ? chat_response(ids, r, results, *ctx.tokenizer) : completion_response(ids, r, results, *ctx.tokenizer)),
                  "application/json");
}

void HttpServer::Impl::respond_stream(httplib::Response& res, const std::shared_ptr<ApiRequest>& r, const ResponseIds& ids,
                                      const std::shared_ptr<RequestStream>& stream) {
  struct State {
    std::vector<ChoiceResult> results;
    std::size_t finished = 0;
    bool started = false;
  };
  auto st = std::make_shared<State>();
  st->results.resize(r->prompts.size() * r->n);
  const tok::Tokenizer* tok = ctx.tokenizer;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [r, ids, stream, st, tok](std::size_t, httplib::DataSink& sink) {
        auto send = [&](const auto& j) {
          const std::string line = "data: " + dump(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (!st->started) {
          st->started = true;
          if (r->chat)
            for (std::size_t c = 0; c < st->results.size(); ++c)
              if (!send(chat_role_chunk(ids, *r, static_cast<int>(c)))) return false;
        }
        if (st->finished == st->results.size()) {
          if (r->include_usage && !send(usage_chunk(ids, r->chat, request_usage(*r, st->results)))) return false;
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        }
        auto e = stream->pop(50ms);
        if (!e) return true;  // called again: nothing new yet
        if (!e->error.empty()) {
          send(json{{"error", {{"message", e->error}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
          return false;
        }
        st->results[e->choice].add(*e);
        if (!e->finish_reason.empty()) ++st->finished;
        auto c = r->chat ? chat_chunk(ids, *r, *e, *tok) : completion_chunk(ids, *r, *e, *tok);
        return !c || send(*c);  // a failed write: the client is gone
      },
      [stream, open = open_streams](bool success) {
        // Whatever ended the response early, the request's sequences are freed at the next step.
        if (!success) stream->cancel();
        --*open;
      });
  ++*open_streams;
}

void HttpServer::Impl::handle_generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  auto r = std::make_shared<ApiRequest>(chat ? parse_chat_request(body, ctx) : parse_completion_request(body, ctx));
  auto stream = std::make_shared<RequestStream>(static_cast<int>(r->prompts.size()) * r->n);
  const ResponseIds ids = new_ids(chat);
  submit_or_throw(loop, specs_of(*r, ctx.max_model_len, ids.id), stream);
  try {
    if (r->stream)
      respond_stream(res, r, ids, stream);
    else
      respond_whole(req, res, *r, ids, stream);
  } catch (...) {
    stream->cancel();
    throw;
  }
}

void HttpServer::Impl::routes() {
  // The head's limits and framing were checked before httplib parsed it (serve_socket, answer).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // As vLLM: only /v1 needs the key; /health, /metrics and the tokenizer routes stay open.
    if (opt.api_key.empty() || req.path.rfind("/v1", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    // The whole value: get_header_value would stop at a NUL byte, taking "Bearer <key>\0..." for the key.
    const auto given = req.headers.find("Authorization");
    if (given != req.headers.end() && same_secret(given->second, "Bearer " + opt.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "Incorrect API key provided; send it as 'Authorization: Bearer <key>'", "", "invalid_request_error",
                             "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  auto guarded = [this](auto fn) {
    return [fn](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, e.what(), "", "server_error"));
      }
    };
  };
  http.Post("/v1/chat/completions", guarded([this](const auto& req, auto& res) { handle_generate(req, res, true); }));
  http.Post("/v1/completions", guarded([this](const auto& req, auto& res) { handle_generate(req, res, false); }));
  auto json_post = [this, guarded](json (*answer)(const json&, const ApiContext&)) {
    return guarded([this, answer](const httplib::Request& req, httplib::Response& res) {
      json body;
      try {
        body = json::parse(req.body);
      } catch (const json::exception& e) {
        throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
      }
      res.set_content(dump(answer(body, ctx)), "application/json");
    });
  };
  http.Post("/tokenize", json_post(&tokenize_response));
  http.Post("/detokenize", json_post(&detokenize_response));
  http.Get("/tokenizer_info",
           [this](const httplib::Request&, httplib::Response& res) { res.set_content(dump(tokenizer_info(ctx)), "application/json"); });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {
        {"id", ctx.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "model-optimizer"}, {"max_model_len", ctx.max_model_len}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{\"status\":\"ok\"}", "application/json"); });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(loop.metrics().prometheus(), "text/plain; version=0.0.4");
  });
  // Errors httplib raises itself (unknown route, body over the limit, unreadable request) get OpenAI's shape too.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Handled;
    std::string msg = res.status == 404   ? fmt::format("no route {} {}", req.method, req.path)
                      : res.status == 405 ? fmt::format("method {} not allowed on {}", req.method, req.path)
                      : res.status == 413 ? "the request body is too large"
                      : res.status == 400 && to_lower(req.get_header_value("Transfer-Encoding")) == "chunked"
                          ? "the chunked request body is malformed or incomplete: each chunk is its size in hex, CR LF, its data, CR LF; "
                            "then 0, CR LF, CR LF"
                          : fmt::format("the request could not be read (HTTP {})", res.status);
    send_error(res, ApiError(res.status, msg, "", res.status == 404 ? "not_found_error" : "invalid_request_error"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError(500, "internal error", "", "server_error"));
  });
  http.set_payload_max_length(opt.max_body_bytes);
  // httplib drops requests pipelined behind the first one and then idles on the connection; one request per
  // connection, answered with `Connection: close`, lets such clients resend at once instead of waiting.
  http.set_keep_alive_max_count(1);
  http.set_idle_interval(0, 100'000);  // on_idle every 100 ms without a new connection: ConnectionThreads::make_room
  http.set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;  // for the backlog, below
  });
  http.new_task_queue = [this] {
    threads = std::make_shared<ConnectionThreads>(static_cast<std::size_t>(opt.max_connections));
    return new ThreadsQueue(threads, bound_port);
  };
  http.serve_socket = [this](int fd) { serve_socket(fd); };
}

void HttpServer::Impl::process(httplib::Stream& conn, const HeadReader& head) {
  CheckedRequestStream checked(conn, head);
  bool closed = false;
  http.process_request(checked, true, closed, nullptr);
}

// The head is read here, within its limits and before the API key is looked at, then httplib parses it.
void HttpServer::Impl::serve_socket(int fd) {
  const auto read_timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.read_timeout_s));
  SocketConnection conn(fd, Clock::now() + read_timeout);
  HeadReader head;
  {
    const ConnectionThreads::HeadWait waiting(*threads, fd);  // may be shut when the slots are full
    read_head(conn, head);
    if (head.state() == HeadReader::State::refused) {
      write_refusal(conn, head.refusal());
      drain_before_close(fd);
    }
  }
  if (head.state() == HeadReader::State::done) {
    conn.set_deadline(Clock::now() + read_timeout);  // the body's own read_timeout
    process(conn, head);
  }
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

HttpServer::HttpServer(ServingLoop& loop, ApiContext ctx, HttpOptions opt)
    : impl_(std::make_unique<Impl>(loop, std::move(ctx), std::move(opt))) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::bind() {
  if (!impl_->http.bind_to_port(impl_->opt.host.c_str(), impl_->opt.port))
    throw Error(
        fmt::format("serve: cannot listen on {}:{} (address in use, or not an address of this machine)", impl_->opt.host, impl_->opt.port));
  impl_->bound_port = impl_->opt.port;
  // httplib listens with a backlog of 5: a burst of new connections would wait for SYN retries (1 s, 3 s, ...).
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, SOMAXCONN);
}

void HttpServer::serve() { impl_->http.listen_after_bind(); }
void HttpServer::drain_streams(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (*impl_->open_streams > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
}

void HttpServer::stop() { impl_->http.stop(); }

std::string HttpServer::answer(std::string_view raw_request) {
  MemoryStream stream(raw_request);
  HeadReader head;
  read_head(stream, head);
  if (head.state() == HeadReader::State::refused) write_refusal(stream, head.refusal());
  if (head.state() == HeadReader::State::done) impl_->process(stream, head);
  return std::move(stream.out);
}
int HttpServer::port() const { return impl_->bound_port; }

}  // namespace mo::serve
