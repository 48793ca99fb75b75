// Without the optional `zeromq` package the publisher fails with an error
// that says what to install (the package is mocked away here).

import { expect, it, vi } from 'vitest';

vi.mock('zeromq', () => {
  throw new Error('Cannot find package "zeromq"');
});

it('says how to get zeromq when it cannot be loaded', async () => {
  const { ZmqEventPublisher } = await import('../bindings/node/zmq-publisher.js');
  await expect(ZmqEventPublisher.create({ endpoint: 'tcp://127.0.0.1:*' })).rejects.toThrow(
    /the ZeroMQ publisher needs the optional dependency "zeromq" \(npm install zeromq\)/,
  );
  await expect(ZmqEventPublisher.create({ mode: 'listen' as never })).rejects.toThrow(/options.mode must be "bind" or "connect", got "listen"/);
});
