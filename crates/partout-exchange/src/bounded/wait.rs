//! [`Waiter`]: how a producer waits for room, blocking its thread or as a task, so that the
//! blocking push and the async one are one loop; and [`block_on`], which runs that loop on
//! the calling thread.

use event_listener::{EventListener, Listener};
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How a producer waits: [`Thread`](Self::Thread) blocks the calling thread inside each wait
/// (the future is ready the first time it is polled), [`Task`](Self::Task) lets the
/// executor's other tasks run.
#[derive(Debug, Clone, Copy)]
pub(super) enum Waiter {
    /// Blocking the thread: [`BoundedExchange::push`](super::BoundedExchange::push).
    Thread,
    /// As a task: [`BoundedExchange::push_async`](super::BoundedExchange::push_async).
    Task,
}

impl Waiter {
    /// Lets the others run once: the other threads, or the executor's other tasks.
    pub(super) async fn yield_now(self) {
        match self {
            Self::Thread => std::thread::yield_now(),
            Self::Task => YieldNow(false).await,
        }
    }

    /// Waits until `listener` is notified.
    pub(super) async fn wait(self, listener: EventListener) {
        match self {
            Self::Thread => listener.wait(),
            Self::Task => listener.await,
        }
    }

    /// Waits until `listener` is notified or `patience` has passed: whether it passed.
    pub(super) async fn wait_at_most(self, listener: EventListener, patience: Duration) -> bool {
        match self {
            Self::Thread => listener.wait_timeout(patience).is_none(),
            Self::Task => {
                let timer = futures_timer::Delay::new(patience);
                matches!(
                    futures::future::select(listener, timer).await,
                    futures::future::Either::Right(_)
                )
            }
        }
    }
}

/// Lets the other tasks of the executor run once: pending the first time it is polled
/// (waking itself at once), ready the second.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Wakes a thread parked in [`block_on`].
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    /// The calling thread's waker, made once per thread.
    static WAKER: Waker = Waker::from(Arc::new(Unpark(std::thread::current())));
}

/// Runs `future` to its end on the calling thread, parking the thread whenever it is
/// pending. A future that waits with [`Waiter::Thread`] is ready when first polled.
pub(super) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    WAKER.with(|waker| {
        let mut cx = Context::from_waker(waker);
        loop {
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(output) => return output,
                // A wake-up before the park makes the park return at once: none is lost.
                Poll::Pending => std::thread::park(),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_future_is_polled_again_when_woken() {
        // Pending once, waking itself: parked, then unparked at once, then ready.
        block_on(YieldNow(false));
        // Woken from another thread.
        let event = Arc::new(event_listener::Event::new());
        let listener = event.listen();
        let notifier = {
            let event = event.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                event.notify(1);
            })
        };
        block_on(Waiter::Task.wait(listener));
        notifier.join().expect("the notifying thread");
    }

    #[test]
    fn a_thread_waits_for_its_patience_and_tells_it_passed() {
        let event = event_listener::Event::new();
        let started = std::time::Instant::now();
        let passed =
            block_on(Waiter::Thread.wait_at_most(event.listen(), Duration::from_millis(20)));
        assert!(passed);
        assert!(started.elapsed() >= Duration::from_millis(20));
        let listener = event.listen();
        event.notify(1);
        assert!(!block_on(
            Waiter::Thread.wait_at_most(listener, Duration::from_secs(60))
        ));
    }
}
