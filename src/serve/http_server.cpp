// Debian's cpp-httplib is a compiled library built with these options; the header must see the same
// ones, or its classes (Request holds an SSL pointer) would not match the library's.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include "mo/serve/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>

#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/serve/openai_response.h"

namespace mo::serve {

using nlohmann::json;
using namespace std::chrono_literals;

struct HttpServer::Impl {
  ServingLoop& loop;
  ApiContext ctx;
  HttpOptions opt;
  httplib::Server http;
  std::atomic<std::uint64_t> next_id{1};
  int bound_port = 0;

  Impl(ServingLoop& l, ApiContext c, HttpOptions o) : loop(l), ctx(std::move(c)), opt(std::move(o)) {}

  void routes();
  void handle_generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void respond_whole(httplib::Response& res, const ApiRequest& r, const ResponseIds& ids, const std::shared_ptr<RequestStream>& stream);
  void respond_stream(httplib::Response& res, const std::shared_ptr<ApiRequest>& r, const ResponseIds& ids, const std::shared_ptr<RequestStream>& stream);
  ResponseIds new_ids(bool chat) {
    return {fmt::format("{}-{:016x}{:08x}", chat ? "chatcmpl" : "cmpl", std::chrono::system_clock::now().time_since_epoch().count(), next_id++),
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(), ctx.model_name};
  }
};

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
}

std::vector<SeqSpec> specs_of(const ApiRequest& r, int max_model_len) {
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
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

void submit_or_throw(ServingLoop& loop, std::vector<SeqSpec> specs, const std::shared_ptr<RequestStream>& stream) {
  switch (loop.submit(std::move(specs), stream)) {
    case SubmitStatus::ok: return;
    case SubmitStatus::queue_full:
      throw ApiError(503, fmt::format("the server is busy: {} requests are waiting (max_queue_len); retry later", loop.max_queue_len()), "",
                     "server_error", "queue_full");
    case SubmitStatus::shutting_down: throw ApiError(503, "the server is shutting down", "", "server_error", "shutting_down");
  }
}

}  // namespace

void HttpServer::Impl::respond_whole(httplib::Response& res, const ApiRequest& r, const ResponseIds& ids, const std::shared_ptr<RequestStream>& stream) {
  std::vector<ChoiceResult> results(r.prompts.size() * r.n);
  std::size_t finished = 0;
  while (finished < results.size()) {
    auto e = stream->pop(100ms);
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
        auto send = [&](const json& j) {
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
          send({{"error", {{"message", e->error}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
          return false;
        }
        st->results[e->choice].add(*e);
        if (!e->finish_reason.empty()) ++st->finished;
        auto c = r->chat ? chat_chunk(ids, *r, *e, *tok) : completion_chunk(ids, *r, *e, *tok);
        return !c || send(*c);  // a failed write: the client is gone
      },
      [stream](bool success) {
        // Whatever ended the response early, the request's sequences are freed at the next step.
        if (!success) stream->cancel();
      });
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
  submit_or_throw(loop, specs_of(*r, ctx.max_model_len), stream);
  const ResponseIds ids = new_ids(chat);
  try {
    if (r->stream) respond_stream(res, r, ids, stream);
    else respond_whole(res, *r, ids, stream);
  } catch (...) {
    stream->cancel();
    throw;
  }
}

void HttpServer::Impl::routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt.api_key.empty() || req.path.rfind("/v1", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + opt.api_key) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "Incorrect API key provided; send it as 'Authorization: Bearer <key>'", "", "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  auto guarded = [](auto fn) {
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
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", ctx.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "model-optimizer"}, {"max_model_len", ctx.max_model_len}};
    res.set_content(dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
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
                                          : fmt::format("the request could not be read (HTTP {})", res.status);
    send_error(res, ApiError(res.status, msg, "", res.status == 404 ? "not_found_error" : "invalid_request_error"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError(500, "internal error", "", "server_error"));
  });
  http.set_payload_max_length(opt.max_body_bytes);
  const int threads = opt.worker_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
}

HttpServer::HttpServer(ServingLoop& loop, ApiContext ctx, HttpOptions opt) : impl_(std::make_unique<Impl>(loop, std::move(ctx), std::move(opt))) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::bind() {
  if (!impl_->http.bind_to_port(impl_->opt.host.c_str(), impl_->opt.port))
    throw Error(fmt::format("serve: cannot listen on {}:{} (address in use, or not an address of this machine)", impl_->opt.host, impl_->opt.port));
  impl_->bound_port = impl_->opt.port;
}

void HttpServer::serve() { impl_->http.listen_after_bind(); }
void HttpServer::stop() { impl_->http.stop(); }
int HttpServer::port() const { return impl_->bound_port; }

}  // namespace mo::serve
