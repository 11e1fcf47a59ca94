// InlineFunction: a move-only std::function that keeps callables of up to N bytes in place.
// The event loop's posted tasks and wait handlers use it: a handler of a data path captures a
// few pointers, so posting or arming one allocates nothing (std::function allocates past two
// pointers). A bigger callable still works; it goes to the heap.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace unetback::event {

template <typename Signature, std::size_t N>
class InlineFunction;

template <typename R, typename... Args, std::size_t N>
class InlineFunction<R(Args...), N> {
 public:
  InlineFunction() = default;
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, InlineFunction>>>
  InlineFunction(
      F&& f) {  // NOLINT(google-explicit-constructor): a callable converts, as std::function
    emplace(std::forward<F>(f));
  }
  InlineFunction(InlineFunction&& o) noexcept { take(o); }
  InlineFunction& operator=(InlineFunction&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) { return ops_->call(storage_, std::forward<Args>(args)...); }
  void reset() noexcept {
    if (ops_ != nullptr) std::exchange(ops_, nullptr)->destroy(storage_);
  }

  /// Whether a callable of type F is kept in place (no allocation).
  template <typename F>
  static constexpr bool kInPlace =
      sizeof(F) <= N &&
      alignof(F) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<F>;

 private:
  struct Ops {
    R (*call)(void*, Args&&...);
    void (*move)(void* to, void* from) noexcept;  // and destroys `from`
    void (*destroy)(void*) noexcept;
  };

  template <typename F>
  void emplace(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (kInPlace<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      static constexpr Ops kOps{
          [](void* p, Args&&... a) -> R { return (*static_cast<D*>(p))(std::forward<Args>(a)...); },
          [](void* to, void* from) noexcept {
            ::new (to) D(std::move(*static_cast<D*>(from)));
            static_cast<D*>(from)->~D();
          },
          [](void* p) noexcept { static_cast<D*>(p)->~D(); }};
      ops_ = &kOps;
    } else {
      ::new (static_cast<void*>(storage_)) D*(new D(std::forward<F>(f)));
      static constexpr Ops kOps{
          [](void* p, Args&&... a) -> R {
            return (**static_cast<D**>(p))(std::forward<Args>(a)...);
          },
          [](void* to, void* from) noexcept { ::new (to) D*(*static_cast<D**>(from)); },
          [](void* p) noexcept { delete *static_cast<D**>(p); }};
      ops_ = &kOps;
    }
  }
  void take(InlineFunction& o) noexcept {
    if (o.ops_ == nullptr) return;
    o.ops_->move(storage_, o.storage_);
    ops_ = std::exchange(o.ops_, nullptr);
  }

  alignas(std::max_align_t) std::byte storage_[N];
  const Ops* ops_ = nullptr;
};

}  // namespace unetback::event
