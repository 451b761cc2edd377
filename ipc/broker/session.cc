#include "ipc/broker/session.h"

#include <sys/socket.h>

#include <exception>
#include <string>

#include "common/utf8.h"
#include "spdlog/spdlog.h"

namespace qr::broker {
namespace {

constexpr std::chrono::seconds kCloseLinger{2};
constexpr size_t kMaxQueuedBytes = 4 << 20;
// A connection with this much unread reply is not read from until it drains:
// a peer pipelining STATUS gets its replies at the pace it reads them.
constexpr size_t kPauseReadingBytes = 256 << 10;
// Requests handled for one connection before the others get their turn.
constexpr int kRequestsPerTurn = 4;

const char* TypeName(const ipc::Message& m) {
  return ipc::MessageTypeName(static_cast<uint16_t>(ipc::TypeOf(m)));
}

}  // namespace

void SendNowOrNever(int fd, const Status& why) {
  auto frame = ipc::EncodeFrame(ipc::ErrorReplyFor(why));
  if (!frame.ok()) return;
  ssize_t n = ::send(fd, frame->data(), frame->size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)n;
}

void Session::Send(const ipc::Message& m) {
  if (finished_ || closing_) return;
  auto frame = ipc::EncodeFrame(m);
  if (!frame.ok()) {
    // A reply the peer never gets would leave it waiting out its timeout:
    // it gets an error instead (ErrorReplyFor always encodes) and this
    // connection ends.
    spdlog::error("pid {}: cannot encode a {} reply: {}", pid, TypeName(m),
                  SanitizeUtf8(frame.status().ToString()));
    frame = ipc::EncodeFrame(ipc::ErrorReplyFor(frame.status().WithContext(
        std::string("the broker could not encode its ") + TypeName(m) + " reply")));
    if (!frame.ok()) {
      Finish();
      return;
    }
    out_.push_back(std::move(*frame));
    queued_bytes_ += out_.back().size();
    if (!writing_) Write();
    CloseAfterWrites();
    return;
  }
  queued_bytes_ += frame->size();
  out_.push_back(std::move(*frame));
  // A peer that never reads must not grow the broker without bound.
  if (queued_bytes_ > kMaxQueuedBytes) {
    spdlog::warn("pid {}: {} bytes of replies unread; dropping the connection", pid, queued_bytes_);
    // Finished later: the caller may be iterating over group members.
    closing_ = true;
    auto self = shared_from_this();
    asio::post(socket_.get_executor(), [self] { self->Finish(); });
    return;
  }
  if (!writing_) Write();
}

void Session::CloseAfterWrites() {
  if (finished_ || closing_) return;
  closing_ = true;
  auto self = shared_from_this();
  linger_.expires_after(kCloseLinger);
  linger_.async_wait([self](const std::error_code& ec) {
    if (!ec) self->Finish();
  });
  if (!writing_) HalfClose();
}

void Session::Finish() {
  if (finished_) return;
  finished_ = true;
  std::error_code ec;
  linger_.cancel();
  socket_.shutdown(Socket::shutdown_both, ec);
  socket_.close(ec);
  owner_->OnClosed(shared_from_this());
}

void Session::SayAndFinish(const Status& why) {
  if (finished_) return;
  if (out_.empty()) SendNowOrNever(socket_.native_handle(), why);
  Finish();
}

void Session::Read() {
  reading_ = true;
  auto self = shared_from_this();
  socket_.async_read_some(asio::buffer(buf_), [self](const std::error_code& ec, size_t n) {
    self->reading_ = false;
    self->OnRead(ec, n);
  });
}

void Session::OnRead(const std::error_code& ec, size_t n) {
  if (finished_) return;
  if (ec) {
    Finish();
    return;
  }
  if (closing_) {  // draining what the peer still sends
    Read();
    return;
  }
  in_.insert(in_.end(), buf_.data(), buf_.data() + n);
  Process();
}

// Handles up to kRequestsPerTurn complete requests, then yields to the other
// connections; reads more only once the buffered ones are handled and the
// peer has read most of its replies.
void Session::Process() {
  processing_ = false;
  if (finished_) return;
  if (closing_) {
    DrainOrRead();
    return;
  }
  auto self = shared_from_this();
  for (int handled = 0; !closing_ && !finished_; ++handled) {
    size_t consumed = 0;
    auto m = ipc::TryDecodeFrame(in_.data(), in_.size(), &consumed, ipc::kMaxRequestFrameBytes);
    if (!m.ok()) {
      if (owner_->WarnBudget()) {
        spdlog::warn("pid {}: bad frame: {}", pid, SanitizeUtf8(m.status().ToString()));
      }
      Send(ipc::ErrorReplyFor(m.status()));
      CloseAfterWrites();
      break;
    }
    if (!m->has_value()) break;
    if (handled == kRequestsPerTurn || queued_bytes_ > kPauseReadingBytes) {
      Yield();
      return;
    }
    in_.erase(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(consumed));
    last_request_ = std::chrono::steady_clock::now();
    // No exception may leave the io_context: it would stop every group's
    // broker. One that escapes a handler ends this connection only.
    try {
      owner_->OnRequest(self, std::move(**m));
    } catch (const std::exception& e) {
      spdlog::error("pid {}: a request failed with an exception: {}; dropping the connection", pid,
                    SanitizeUtf8(e.what()));
      Finish();
      return;
    }
  }
  DrainOrRead();
}

// Keeps one read outstanding: for the next request, or, once closing, to see
// the peer's EOF (which ends the connection before kCloseLinger).
void Session::DrainOrRead() {
  if (!finished_ && !reading_) Read();
}

// Continues Process later: now if only the turn is over, after the next write
// completes if the peer is behind on its replies.
void Session::Yield() {
  if (queued_bytes_ > kPauseReadingBytes) {
    resume_after_write_ = true;
    return;
  }
  if (processing_) return;
  processing_ = true;
  auto self = shared_from_this();
  asio::post(socket_.get_executor(), [self] { self->Process(); });
}

void Session::Write() {
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(out_.front()),
                    [self](const std::error_code& ec, size_t) { self->OnWrite(ec); });
}

void Session::OnWrite(const std::error_code& ec) {
  writing_ = false;
  if (finished_) return;
  if (ec) {
    Finish();
    return;
  }
  queued_bytes_ -= out_.front().size();
  out_.pop_front();
  if (!out_.empty()) {
    Write();
  } else if (closing_) {
    HalfClose();
  }
  if (resume_after_write_ && queued_bytes_ <= kPauseReadingBytes / 2) {
    resume_after_write_ = false;
    Yield();
  }
}

void Session::HalfClose() {
  std::error_code ec;
  socket_.shutdown(Socket::shutdown_send, ec);
}

}  // namespace qr::broker
