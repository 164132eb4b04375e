// Operations recycled on the thread that frees them (engine.hpp: the Operation is the only
// allocation of a call): a small call then costs no malloc. A class derives from Recycled<Itself>;
// objects of other sizes (a class derived further) go to the global allocator.
#pragma once

#include <cstddef>
#include <new>

namespace tessera {

template <class T, int kKeep = 8>
class Recycled {
 public:
  static void* operator new(size_t bytes) {
    Pool& pool = pool_;
    if (bytes == sizeof(T) && pool.n > 0) return pool.items[--pool.n];
    return ::operator new(bytes);
  }
  static void operator delete(void* p, size_t bytes) {
    Pool& pool = pool_;
    if (bytes == sizeof(T) && pool.n < kKeep) {
      pool.items[pool.n++] = p;
      return;
    }
    ::operator delete(p);
  }

 private:
  struct Pool {
    void* items[kKeep];
    int n = 0;
    ~Pool() {
      while (n > 0) ::operator delete(items[--n]);
    }
  };
  static thread_local Pool pool_;
};

template <class T, int kKeep>
thread_local typename Recycled<T, kKeep>::Pool Recycled<T, kKeep>::pool_;

}  // namespace tessera
