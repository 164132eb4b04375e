// PLACEHOLDER (being written): the device executor's host side.
#include "collectives/exec/device/device_executor.hpp"

namespace tessera {

struct DeviceExecutor::State {};
struct DeviceExecutor::LLState {};

DeviceExecutor::DeviceExecutor(const DeviceExecutorOptions& options) : options_(options) {}
DeviceExecutor::~DeviceExecutor() = default;

}  // namespace tessera
