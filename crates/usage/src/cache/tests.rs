mod key;
mod session;
mod store;
mod stream;
